-- A quota sync says it is alive for the next ARGV[2] ms, and learns how many syncs are (quota/leases.py).
-- KEYS: 1 the live syncs (zset: owner token by expiry, server time in ms); ARGV: 1 token, 2 ms.
-- Drops the syncs whose beat expired; returns how many are alive, this one included.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return redis.call('ZCARD', KEYS[1])
