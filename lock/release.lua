-- release.lua: delete the lease only if it still carries our token.
--
-- KEYS[1] lock key    KEYS[2] "wanted" mark (same Cluster slot)    ARGV[1] token
--
-- Returns 0 when the lease expired or belongs to someone else; else deletes
-- it and returns 1, or 2 when another client was refused the key within
-- the mark's lifetime (obtain.lua): the caller then knows that someone is
-- waiting for its turn. The mark goes with the lease: a waiter still
-- refused sets it again.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("DEL", KEYS[1])
  return 1 + redis.call("DEL", KEYS[2])
end
return 0
