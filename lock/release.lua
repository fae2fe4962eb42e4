-- release.lua: delete the lease only if it still carries our token.
--
-- KEYS[1] lock key    ARGV[1] token
--
-- Returns 1 when deleted, 0 when the lease expired or belongs to someone else.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
