-- obtain.lua: take the lease and issue a fencing token in one atomic step.
--
-- KEYS[1] lock key          ARGV[1] token (random, >= 128 bits)
-- KEYS[2] fence counter key ARGV[2] lease TTL in milliseconds
-- KEYS[3] "wanted" mark     ARGV[3] idle expiry of the fence counter in milliseconds
--                           ARGV[4] lifetime of the "wanted" mark in milliseconds
--                           ARGV[5] channel to PUBLISH the lock key on when
--                                   refused ("" for none), so that a holder
--                                   listening hears at once that it is wanted
-- A ranked contender (ObtainRanked) also passes
-- KEYS[4] ranks: contender → rank   ARGV[6] the contender's id (its Client's)
-- KEYS[5] contender → expiry (ms)   ARGV[7] its rank (lower goes first)
--                                   ARGV[8] how long its rank counts, in ms
--
-- Returns the new fencing token (> 0) when the lease was taken, and when
-- someone else holds it -1 - (the lease's remaining time to live in
-- milliseconds, 0 when it has none): a caller that sees it go up between
-- two attempts knows the lease was renewed or passed to a new holder, so
-- its holders are alive. A refused caller also marks the key wanted, for
-- the holder's release to see (release.lua) and publishes the key for a
-- holder that listens (WithWantedNotices). All KEYS must hash to one
-- Cluster slot.
--
-- A ranked contender is refused a free key while another contender with
-- a lower rank counts; a refused one marks the key wanted all the same
-- (so the next release wakes it) and, if the key is held, publishes
-- "key NUL rank". It gets
-- {fence or refusal as above, the lowest rank of the others or false}.

-- Redis < 5 needs effects replication before a write may follow TIME;
-- from Redis 7 on this is the only mode and the call is a no-op.
if redis.replicate_commands then
  redis.replicate_commands()
end

local t = redis.call("TIME")
local ranked = ARGV[6] ~= nil

-- others returns the lowest rank among the contenders other than the
-- caller, or false.
local function others()
  local low = redis.call("ZRANGE", KEYS[4], 0, 1, "WITHSCORES")
  if low[1] == ARGV[6] then
    return low[4] or false
  end
  return low[2] or false
end

local function answer(n)
  if ranked then
    local o = others()
    if o then
      o = string.format("%.0f", tonumber(o))
    end
    return {n, o}
  end
  return n
end

if ranked then
  local nowms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local gone = redis.call("ZRANGEBYSCORE", KEYS[5], "-inf", nowms)
  if #gone > 0 then
    redis.call("ZREM", KEYS[4], unpack(gone))
    redis.call("ZREM", KEYS[5], unpack(gone))
  end
  redis.call("ZADD", KEYS[4], ARGV[7], ARGV[6])
  redis.call("ZADD", KEYS[5], nowms + tonumber(ARGV[8]), ARGV[6])
  redis.call("PEXPIRE", KEYS[4], ARGV[8])
  redis.call("PEXPIRE", KEYS[5], ARGV[8])
end

local held = redis.call("GET", KEYS[1])
if held ~= ARGV[1] then
  -- Not ours (an earlier attempt of the same Obtain may have taken it
  -- without its caller hearing the answer: then take it again).
  local o = ranked and others()
  if held or (o and tonumber(o) < tonumber(ARGV[7])) then
    -- Refused: wanted, even when a lower rank takes the free key first,
    -- so that its release wakes this contender at once (release.lua).
    redis.call("SET", KEYS[3], "1", "PX", ARGV[4])
    if held then
      if ARGV[5] ~= "" then
        -- Best effort: an ACL user without the channel still gets its answer.
        local note = KEYS[1]
        if ranked then
          note = note .. "\0" .. ARGV[7]
        end
        redis.pcall("PUBLISH", ARGV[5], note)
      end
    end
    return answer(-1 - math.max(redis.call("PTTL", KEYS[1]), 0))
  end
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
else
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
if ranked then
  redis.call("ZREM", KEYS[4], ARGV[6])
  redis.call("ZREM", KEYS[5], ARGV[6])
end

-- fence = max(counter, now in microseconds) + 1. The counter alone keeps
-- fences unique and increasing while it survives; the clock term makes a
-- fence issued after the counter was lost (idle expiry, a restart without
-- persistence, a failover to a replica that missed the last INCRs) greater
-- than every fence issued before, provided the server clock did not go
-- back by more than the time the loss took (docs/locking.md, "Fences that
-- survive failover"). now < 2^53, so the double arithmetic is exact; the
-- value is written as a string because tostring() keeps only 14 digits.
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local counter = tonumber(redis.call("GET", KEYS[2]) or "0")
if counter < now then
  redis.call("SET", KEYS[2], t[1] .. string.format("%06d", tonumber(t[2])))
end
local fence = redis.call("INCR", KEYS[2])
redis.call("PEXPIRE", KEYS[2], ARGV[3])
return answer(fence)
