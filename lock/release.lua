-- release.lua: delete the lease only if it still carries our token.
--
-- KEYS[1] lock key    KEYS[2] "wanted" mark (same Cluster slot)    ARGV[1] token
-- ARGV[2] channel to PUBLISH the lock key on when it was wanted ("" for
--         none), so that waiters listening try at once (WithWantedNotices)
--
-- Returns 0 when the lease expired or belongs to someone else; else deletes
-- it and returns 1, or 2 when another client was refused the key within
-- the mark's lifetime (obtain.lua): the caller then knows that someone is
-- waiting for its turn. The mark goes with the lease: a waiter still
-- refused sets it again.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("DEL", KEYS[1])
  local wanted = redis.call("DEL", KEYS[2])
  if wanted == 1 and ARGV[2] and ARGV[2] ~= "" then
    redis.pcall("PUBLISH", ARGV[2], KEYS[1])
  end
  return 1 + wanted
end
return 0
