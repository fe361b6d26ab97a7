-- Settle a hold at its actual cost: live balances move by (held - actual), the usage goes to the stream.
-- Idempotent: a settled or released hold is left alone. A hold the sweeper released (lease expired), or
-- one Redis lost with its data (a restart, a flush) is charged in full.
-- Optionally charges rate limits for the usage too, forced (gcra.lua's arithmetic, as gcra_multi.lua with
-- force), in the same step and so exactly once: only when the settlement applies.
-- KEYS: 1 holds zset, 2 done marker, 3 user live, 4 key live, 5 user held, 6 key held, 7 stream,
--       8 the partition's epoch
--       with charges: 9.. the limits' keys (GCRA TATs)
-- ARGV: 1 the hold (its member in the holds zset: redis_quota.py `_hold`), 2 actual, 3 key limited,
--       4 marker ttl s, 5 the stream entry (redis_quota.py `_usage`), 6 log json or '', 7 amount held,
--       8 the epoch the hold was reserved in ('' unknown)
--       with charges: 9 how far a charge may push a TAT ahead of now, ns (one period if longer),
--       10.. per limit: emission interval ns, count, cost
-- returns {1, has user balance, user, has key balance, key, entry id} | {0, state}
-- The common case writes no marker: removing the hold is what makes a repeat a no-op. Only when the hold
-- is gone does the marker decide: 'settled' or 'released' (a repeat: nothing to do), 'swept' (the
-- sweeper returned it: charge in full, once), none — settled before in this incarnation of Redis, unless
-- the partition's epoch is no longer the one the hold was reserved in (Redis lost the hold with its data
-- since: charge in full, once). A marker per settle cost Redis a key created and expired per call
-- and an hour of markers in memory (docs/PERFORMANCE.md#figures-behind-the-code).
local actual = tonumber(ARGV[2])
local limited = ARGV[3] == '1'
local has_user, user, has_key, key = 0, 0, 0, 0
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then  -- numbers go to Redis as strings (see reserve.lua)
  local held = ARGV[7]
  local delta = string.format('%d', tonumber(held) - actual)
  redis.call('DECRBY', KEYS[5], held)
  -- the reserve found the live balances, and nothing deletes one while its hold is open (a flush takes
  -- the hold with it): no EXISTS before the INCRBY
  has_user, user = 1, redis.call('INCRBY', KEYS[3], delta)
  if limited then
    redis.call('DECRBY', KEYS[6], held)
    has_key, key = 1, redis.call('INCRBY', KEYS[4], delta)
  end
else
  local done = redis.call('GET', KEYS[2])
  if done and done ~= 'swept' then return {0, done} end
  if not done and ARGV[8] ~= '' and redis.call('GET', KEYS[8]) == ARGV[8] then return {0, 'settled'} end
  -- swept, or lost with Redis's data: charged in full, on the balances that are loaded; marked, so that a
  -- repeat finds it settled
  redis.call('SET', KEYS[2], 'settled', 'EX', ARGV[4])
  if redis.call('EXISTS', KEYS[3]) == 1 then has_user, user = 1, redis.call('INCRBY', KEYS[3], -actual) end
  if limited and redis.call('EXISTS', KEYS[4]) == 1 then
    has_key, key = 1, redis.call('INCRBY', KEYS[4], -actual)
  end
end
local id
if ARGV[6] == '' then
  id = redis.call('XADD', KEYS[7], '*', 'use', ARGV[5])
else
  id = redis.call('XADD', KEYS[7], '*', 'use', ARGV[5], 'g', ARGV[6])
end
if #KEYS > 8 then
  local max_ahead = tonumber(ARGV[9])
  local now_s, now_ns = gcra_now()
  for i = 1, #KEYS - 8 do
    local interval = tonumber(ARGV[7 + 3 * i])
    local count = tonumber(ARGV[8 + 3 * i])
    local cost = tonumber(ARGV[9 + 3 * i])
    if cost > 0 then
      local ahead = gcra_ahead(KEYS[8 + i], now_s, now_ns)
      gcra_store(KEYS[8 + i], now_s, now_ns, gcra_forced(ahead, interval, count, cost, max_ahead))
    end
  end
end
return {1, has_user, user, has_key, key, id}
