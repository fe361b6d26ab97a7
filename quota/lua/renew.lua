-- Extend the lease of an open hold (streaming calls renew while they run).
-- KEYS: 1 hold, 2 holds zset; ARGV: 1 hold id, 2 lease ms. returns 1 renewed | 0 no such hold
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local t = redis.call('TIME')
local expires = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'e', expires)
redis.call('ZADD', KEYS[2], expires, ARGV[1])
return 1
