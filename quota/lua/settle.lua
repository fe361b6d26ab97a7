-- Settle a hold at its actual cost: live balances move by (held - actual), the usage goes to the stream.
-- Idempotent: a settled or released hold is left alone. A hold the sweeper released (lease expired)
-- is charged in full.
-- Optionally charges rate limits for the usage too, forced (gcra.lua's arithmetic, as gcra_multi.lua with
-- force), in the same step and so exactly once: only when the settlement applies.
-- KEYS: 1 hold, 2 holds zset, 3 done marker, 4 user live, 5 key live, 6 user held, 7 key held, 8 stream
--       with charges: 9.. the limits' keys (GCRA TATs)
-- ARGV: 1 hold id, 2 actual, 3 user id, 4 key id, 5 key limited, 6 channel id, 7 log json, 8 marker ttl s
--       with charges: 9 how far a charge may push a TAT ahead of now, ns (one period if longer),
--       10.. per limit: emission interval ns, count, cost
-- returns {1, has user balance, user, has key balance, key, entry id} | {0, state}
local done = redis.call('GET', KEYS[3])
if done then return {0, done} end
local actual = tonumber(ARGV[2])
local held = redis.call('HGET', KEYS[1], 'a')
local delta = -actual
if held then
  held = tonumber(held)
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('DECRBY', KEYS[6], held)
  if ARGV[5] == '1' then redis.call('DECRBY', KEYS[7], held) end
  delta = held - actual
end
local has_user, user, has_key, key = 0, 0, 0, 0
if redis.call('EXISTS', KEYS[4]) == 1 then has_user, user = 1, redis.call('INCRBY', KEYS[4], delta) end
if ARGV[5] == '1' and redis.call('EXISTS', KEYS[5]) == 1 then
  has_key, key = 1, redis.call('INCRBY', KEYS[5], delta)
end
local id = redis.call('XADD', KEYS[8], '*', 'k', 'use', 'u', ARGV[3], 't', ARGV[4], 'l', ARGV[5],
  'c', ARGV[6], 'q', ARGV[2], 'r', ARGV[1], 'g', ARGV[7])
redis.call('SET', KEYS[3], 'settled', 'EX', ARGV[8])
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
