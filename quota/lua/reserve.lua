-- Hold `amount` on a user's live balance and, when the key is limited, on the key's; optionally admit the
-- call through rate limits first, in the same step (one round trip instead of two).
-- KEYS: 1 user live, 2 key live, 3 holds zset, 4 user held, 5 key held, 6 versions hash, 7 the partition's
--       epoch
--       with limits: 8 "limits charged, balance refused" marker of this hold id, 9.. the limits' keys
-- ARGV: 1 amount, 2 the hold (its member in the holds zset: redis_quota.py `_hold`), 3 lease ms,
--       4 key limited (1|0)
--       with limits: 5.. per limit: emission interval ns, count, cost (as gcra_multi.lua)
-- The hold is its member in the holds zset, scored by its lease end: no key of its own.
-- returns {1, user, key, v1, v2, v3, epoch} held (v = the versions of the cached shared state,
--   backend/versions.py; epoch: the Redis incarnation the hold is made in, which settle.lua compares)
--   | {0, 'user'|'key', available} refused | {-1, 'user'|'key'} not loaded
--   | {2, retry_after ns, i of the refusing limit with the longest wait, free} refused by a rate limit
-- (integers are returned as integers: Lua's tostring would print large balances as 1e+14)
-- Idempotent by hold: when the hold exists already (this reserve ran, and is run again because its
-- reply was lost with the connection), nothing is held twice and the current balances are returned.
-- Limits: every limit is checked first and charged only when all admit (gcra.lua's arithmetic, as
-- gcra_multi.lua without force); a refusal changes nothing. Once charged they stay
-- charged even when the balance then refuses the hold (as a separate admission before the reservation
-- would); that refusal leaves a marker (60 s) so that a repeated run for the same hold id (its reply was
-- lost) does not charge them again. A held call needs none: the hold itself makes a re-run a no-op.
-- Numbers go to Redis as the strings they came in (ARGV) or through string.format('%d'): Lua's own
-- number-to-string conversion is a floating-point printf, a measurable part of the script's cost.
local amount = tonumber(ARGV[1])
local limited = ARGV[4] == '1'
local user, key
if limited then
  local balances = redis.call('MGET', KEYS[1], KEYS[2])
  user, key = balances[1], balances[2]
else
  user = redis.call('GET', KEYS[1])
end
if not user then return {-1, 'user'} end
if limited and not key then return {-1, 'key'} end
user = tonumber(user)
key = limited and tonumber(key) or -1
local function held(u, k)
  local v = redis.call('HMGET', KEYS[6], 'channels', 'options', 'records')
  -- a loaded balance implies the epoch (load.lua creates it first, and a loss takes both)
  return {1, u, k, tonumber(v[1] or 0), tonumber(v[2] or 0), tonumber(v[3] or 0),
          redis.call('GET', KEYS[7]) or ''}
end
if redis.call('ZSCORE', KEYS[3], ARGV[2]) then return held(user, key) end
local charged = false
if #KEYS > 8 and redis.call('EXISTS', KEYS[8]) == 0 then
  local now_s, now_ns = gcra_now()
  local after, free, retry, refused_by = {}, nil, 0, 0
  for i = 1, #KEYS - 8 do
    local interval = tonumber(ARGV[2 + 3 * i])
    local count = tonumber(ARGV[3 + 3 * i])
    local cost = tonumber(ARGV[4 + 3 * i])
    local ahead = gcra_ahead(KEYS[8 + i], now_s, now_ns)
    local free_i, wait = gcra_check(ahead, interval, count, cost)
    if free == nil or free_i < free then free = free_i end
    if wait > 0 then
      if wait > retry then
        retry = wait
        refused_by = i
      end
    else
      after[i] = ahead + interval * cost
    end
  end
  if refused_by > 0 then return {2, retry, refused_by, free} end
  for i = 1, #KEYS - 8 do
    if tonumber(ARGV[4 + 3 * i]) > 0 then gcra_store(KEYS[8 + i], now_s, now_ns, after[i]) end
  end
  charged = true
end
local function refused(account, available)
  if charged then redis.call('SET', KEYS[8], '1', 'EX', 60) end  -- a re-run of this hold id charges none
  return {0, account, available}
end
-- a hold of 0 (a free call) fits any balance, even one below zero (docs/api/gateway.md#billing: 0 skips the check)
if amount > 0 and user < amount then return refused('user', user) end
if amount > 0 and limited and key < amount then return refused('key', key) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = string.format('%d', now + tonumber(ARGV[3]))
redis.call('ZADD', KEYS[3], expires, ARGV[2])
user = redis.call('DECRBY', KEYS[1], ARGV[1])
redis.call('INCRBY', KEYS[4], ARGV[1])
if limited then
  key = redis.call('DECRBY', KEYS[2], ARGV[1])
  redis.call('INCRBY', KEYS[5], ARGV[1])
end
return held(user, key)
