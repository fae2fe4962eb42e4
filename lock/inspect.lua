-- inspect.lua: read a lock's state without changing it.
--
-- KEYS[1] lock key    KEYS[2] fence counter    KEYS[3] "wanted" mark
-- (same Cluster slot)
--
-- Returns {lease value or "", its PTTL in ms (-2 when absent), the fence
-- counter or "0", 1 when the key is marked wanted else 0}. While the lease
-- is held the counter is its holder's fence: only a granted obtain
-- increments it (obtain.lua).
local v = redis.call("GET", KEYS[1])
return {v or "", redis.call("PTTL", KEYS[1]), redis.call("GET", KEYS[2]) or "0", redis.call("EXISTS", KEYS[3])}
