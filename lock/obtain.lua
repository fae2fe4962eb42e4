-- obtain.lua: take the lease and issue a fencing token in one atomic step.
--
-- KEYS[1] lock key          ARGV[1] token (random, >= 128 bits)
-- KEYS[2] fence counter key ARGV[2] lease TTL in milliseconds
-- KEYS[3] "wanted" mark     ARGV[3] idle expiry of the fence counter in milliseconds
--                           ARGV[4] lifetime of the "wanted" mark in milliseconds
--                           ARGV[5] channel to PUBLISH the lock key on when
--                                   refused ("" for none), so that a holder
--                                   listening hears at once that it is wanted
--
-- Returns the new fencing token (> 0) when the lease was taken, and when
-- someone else holds it -1 - (the lease's remaining time to live in
-- milliseconds, 0 when it has none): a caller that sees it go up between
-- two attempts knows the lease was renewed or passed to a new holder, so
-- its holders are alive. A refused caller also marks the key wanted, for
-- the holder's release to see (release.lua) and publishes the key for a
-- holder that listens (WithWantedNotices). All KEYS must hash to one
-- Cluster slot.

-- Redis < 5 needs effects replication before a write may follow TIME;
-- from Redis 7 on this is the only mode and the call is a no-op.
if redis.replicate_commands then
  redis.replicate_commands()
end

if not redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  -- An earlier attempt of the same Obtain may have succeeded without its
  -- caller hearing the answer (timeout): the lease is ours, take it again.
  if redis.call("GET", KEYS[1]) ~= ARGV[1] then
    redis.call("SET", KEYS[3], "1", "PX", ARGV[4])
    if ARGV[5] ~= "" then
      -- Best effort: an ACL user without the channel still gets its answer.
      redis.pcall("PUBLISH", ARGV[5], KEYS[1])
    end
    return -1 - math.max(redis.call("PTTL", KEYS[1]), 0)
  end
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
end

-- fence = max(counter, now in microseconds) + 1. The counter alone keeps
-- fences unique and increasing while it survives; the clock term makes a
-- fence issued after the counter was lost (idle expiry, a restart without
-- persistence, a failover to a replica that missed the last INCRs) greater
-- than every fence issued before, provided the server clock did not go
-- back by more than the time the loss took (docs/locking.md, "Fences that
-- survive failover"). now < 2^53, so the double arithmetic is exact; the
-- value is written as a string because tostring() keeps only 14 digits.
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local counter = tonumber(redis.call("GET", KEYS[2]) or "0")
if counter < now then
  redis.call("SET", KEYS[2], t[1] .. string.format("%06d", tonumber(t[2])))
end
local fence = redis.call("INCR", KEYS[2])
redis.call("PEXPIRE", KEYS[2], ARGV[3])
return fence
