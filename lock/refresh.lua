-- refresh.lua: extend the lease only if it still carries our token.
--
-- KEYS[1] lock key    KEYS[2] "wanted" mark (same Cluster slot)
-- ARGV[1] token       ARGV[2] new TTL in milliseconds
--
-- Returns 0 when the lease expired or belongs to someone else; else extends
-- it and returns 1, or 2 when another client was refused the key within the
-- mark's lifetime (obtain.lua), which stays for the release to see.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return 1 + redis.call("EXISTS", KEYS[2])
end
return 0
