-- Hold `amount` on a user's live balance and, when the key is limited, on the key's.
-- KEYS: 1 user live, 2 key live, 3 hold hash, 4 holds zset, 5 user held, 6 key held, 7 versions hash
-- ARGV: 1 amount, 2 hold id, 3 lease ms, 4 user id, 5 key id, 6 key limited (1|0)
-- returns {1, user, key, v1, v2, v3} held (v = the versions of the cached shared state, quota/versions.py)
--   | {0, 'user'|'key', available} refused | {-1, 'user'|'key'} not loaded
-- (integers are returned as integers: Lua's tostring would print large balances as 1e+14)
-- Idempotent by hold id: when the hold exists already (this reserve ran, and is run again because its
-- reply was lost with the connection), nothing is held twice and the current balances are returned.
local amount = tonumber(ARGV[1])
local limited = ARGV[6] == '1'
local user = redis.call('GET', KEYS[1])
if not user then return {-1, 'user'} end
user = tonumber(user)
local key = -1
if limited then
  key = redis.call('GET', KEYS[2])
  if not key then return {-1, 'key'} end
  key = tonumber(key)
end
local function held(u, k)
  local v = redis.call('HMGET', KEYS[7], 'channels', 'options', 'records')
  return {1, u, k, tonumber(v[1] or 0), tonumber(v[2] or 0), tonumber(v[3] or 0)}
end
if redis.call('EXISTS', KEYS[3]) == 1 then return held(user, key) end
-- a hold of 0 (a free call) fits any balance, even one below zero (docs/API.md#billing: 0 skips the check)
if amount > 0 and user < amount then return {0, 'user', user} end
if amount > 0 and limited and key < amount then return {0, 'key', key} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[3], 'u', ARGV[4], 't', ARGV[5], 'l', ARGV[6], 'a', amount, 'e', expires)
redis.call('ZADD', KEYS[4], expires, ARGV[2])
user = redis.call('DECRBY', KEYS[1], amount)
redis.call('INCRBY', KEYS[5], amount)
if limited then
  key = redis.call('DECRBY', KEYS[2], amount)
  redis.call('INCRBY', KEYS[6], amount)
end
return held(user, key)
