-- Return a whole hold to the live balances. With ARGV[2] = 'swept' only if its lease passed (the
-- sweeper), and no done marker is left so that a late settlement still charges the full cost.
-- KEYS: 1 hold, 2 holds zset, 3 done marker, 4 user live, 5 key live, 6 user held, 7 key held
-- ARGV: 1 hold id, 2 'released'|'swept', 3 marker ttl s
-- returns 1 released | 0 nothing to do
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local h = redis.call('HMGET', KEYS[1], 'a', 'l', 'e')
if not h[1] then
  if ARGV[2] == 'released' then redis.call('SET', KEYS[3], 'released', 'EX', ARGV[3]) end
  return 0
end
if ARGV[2] == 'swept' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if tonumber(h[3]) > now then return 0 end
end
local amount = tonumber(h[1])
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DECRBY', KEYS[6], amount)
if redis.call('EXISTS', KEYS[4]) == 1 then redis.call('INCRBY', KEYS[4], amount) end
if h[2] == '1' then
  redis.call('DECRBY', KEYS[7], amount)
  if redis.call('EXISTS', KEYS[5]) == 1 then redis.call('INCRBY', KEYS[5], amount) end
end
if ARGV[2] == 'released' then redis.call('SET', KEYS[3], 'released', 'EX', ARGV[3]) end
return 1
