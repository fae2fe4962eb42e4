-- obtain.lua: take the lease and issue a fencing token in one atomic step.
--
-- KEYS[1] lock key          ARGV[1] token (random, >= 128 bits)
-- KEYS[2] fence counter key ARGV[2] lease TTL in milliseconds
--                           ARGV[3] idle expiry of the fence counter in milliseconds
--
-- Returns the new fencing token (> 0) when the lease was taken, 0 when
-- someone else holds it.

-- Redis < 5 needs effects replication before a write may follow TIME;
-- from Redis 7 on this is the only mode and the call is a no-op.
if redis.replicate_commands then
  redis.replicate_commands()
end

if not redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  -- An earlier attempt of the same Obtain may have succeeded without its
  -- caller hearing the answer (timeout): the lease is ours, take it again.
  if redis.call("GET", KEYS[1]) ~= ARGV[1] then
    return 0
  end
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
end

-- A missing counter (idle expiry, flush, restart without persistence) is
-- seeded from the server clock in microseconds, so the next token is still
-- greater than any token issued before, as long as the clock does not go
-- back and fewer than 1e6 tokens per second were issued for this key.
-- The seed is built as a string: Lua numbers are doubles and tostring()
-- would print them with only 14 significant digits.
if redis.call("EXISTS", KEYS[2]) == 0 then
  local t = redis.call("TIME")
  redis.call("SET", KEYS[2], t[1] .. string.format("%06d", tonumber(t[2])))
end
local fence = redis.call("INCR", KEYS[2])
redis.call("PEXPIRE", KEYS[2], ARGV[3])
return fence
