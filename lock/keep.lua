-- keep.lua: extend the lease unless someone else wants the key.
--
-- KEYS[1] lock key    KEYS[2] "wanted" mark (same Cluster slot)
-- ARGV[1] token       ARGV[2] new TTL in milliseconds
-- ARGV[3] channel to PUBLISH the lock key on when it lets it go ("" for none)
--
-- Returns 0 when the lease expired or belongs to someone else; 1 when it
-- was extended (its fence stays valid: no one held the key in between);
-- 2 when another client was refused the key within the mark's lifetime
-- (obtain.lua): the lease and the mark are then deleted, as release.lua
-- does, so that the waiter finds the key free.
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
  return 0
end
if redis.call("DEL", KEYS[2]) == 1 then
  redis.call("DEL", KEYS[1])
  if ARGV[3] and ARGV[3] ~= "" then
    redis.pcall("PUBLISH", ARGV[3], KEYS[1])
  end
  return 2
end
return redis.call("PEXPIRE", KEYS[1], ARGV[2])
