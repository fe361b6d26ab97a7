-- Extend the lease of an open hold (streaming calls renew while they run).
-- KEYS: 1 holds zset; ARGV: 1 the hold (its member: redis_quota.py `_hold`), 2 lease ms.
-- returns 1 renewed | 0 no such hold
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local t = redis.call('TIME')
local expires = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], string.format('%d', expires), ARGV[1])
return 1
