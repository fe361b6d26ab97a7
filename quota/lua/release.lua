-- Return a whole hold to the live balances. With ARGV[2] = 'swept' only if its lease passed (the
-- sweeper). Either leaves its marker: 'released' makes a later settle a no-op, 'swept' makes a late
-- settle charge the full cost (settle.lua).
-- KEYS: 1 holds zset, 2 done marker, 3 user live, 4 key live, 5 user held, 6 key held
-- ARGV: 1 the hold (its member in the holds zset: redis_quota.py `_hold`), 2 'released'|'swept',
--       3 marker ttl s, 4 amount held, 5 key limited (1|0)
-- returns 1 released | 0 nothing to do
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if ARGV[2] == 'swept' then
  local expires = redis.call('ZSCORE', KEYS[1], ARGV[1])
  if not expires then return 0 end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if tonumber(expires) > now then return 0 end
end
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  if ARGV[2] == 'released' then redis.call('SET', KEYS[2], 'released', 'EX', ARGV[3]) end
  return 0
end
redis.call('DECRBY', KEYS[5], ARGV[4])
if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('INCRBY', KEYS[3], ARGV[4]) end
if ARGV[5] == '1' then
  redis.call('DECRBY', KEYS[6], ARGV[4])
  if redis.call('EXISTS', KEYS[4]) == 1 then redis.call('INCRBY', KEYS[4], ARGV[4]) end
end
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
return 1
