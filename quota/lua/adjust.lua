-- Credit, debit or override an account's live balance once per idempotency key, and queue the change.
-- An override to X sets live = X - open holds, so that calls in flight settle against X.
-- The log text may hold {before} and {after}, filled in here.
-- KEYS: 1 idempotency marker, 2 live, 3 held, 4 stream
-- ARGV: 1 mode add|sub|set, 2 value, 3 account field u|t, 4 account id, 5 ref, 6 log json,
--       7 marker ttl s, 8 allow negative (1|0)
-- returns {1|2, before, after, delta} applied now | applied before; {0, live} refused (subtract above the
-- balance); {3, live} refused (the balance would leave ±2^53, where arithmetic stops being exact — upward
-- counted with the open holds, live + held: the balance they return to when the calls in flight end);
-- {-1} not loaded
local prior = redis.call('GET', KEYS[1])
if prior then
  local b, a, d = string.match(prior, '^(-?%d+):(-?%d+):(-?%d+)$')
  return {2, tonumber(b), tonumber(a), tonumber(d)}
end
local live = redis.call('GET', KEYS[2])
if not live then return {-1} end
live = tonumber(live)
local value = tonumber(ARGV[2])
local held = tonumber(redis.call('GET', KEYS[3]) or '0')
local delta
if ARGV[1] == 'add' then
  delta = value
elseif ARGV[1] == 'sub' then
  if ARGV[8] ~= '1' and live < value then return {0, live} end
  delta = -value
else
  delta = value - held - live
end
if live + held + delta > 9007199254740991 or live + delta < -9007199254740991 then return {3, live} end
local after = redis.call('INCRBY', KEYS[2], delta)
local log = ARGV[6]
if log ~= '' then
  log = string.gsub(log, '{before}', string.format('%d', live))
  log = string.gsub(log, '{after}', string.format('%d', after))
end
local user, key = '0', '0'
if ARGV[3] == 'u' then user = ARGV[4] else key = ARGV[4] end
local entry = string.format('%s %s 1 0 %d %s', user, key, delta, ARGV[5])  -- redis_quota.py `_usage`
if log == '' then
  redis.call('XADD', KEYS[4], '*', 'adj', entry)
else
  redis.call('XADD', KEYS[4], '*', 'adj', entry, 'g', log)
end
local result = string.format('%d:%d:%d', live, after, delta)
redis.call('SET', KEYS[1], result, 'EX', ARGV[7])
return {1, live, after, delta}
