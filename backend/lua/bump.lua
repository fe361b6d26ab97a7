-- Bump one version counter of the shared state workers cache (backend/versions.py).
-- KEYS: 1 versions hash; ARGV: 1 the counter to bump, 2.. every counter name
-- When the hash is missing (a store that lost its data), every counter starts at the server's clock in
-- microseconds, so no counter ever falls below a value handed out before.
-- Returns {the new value, then the value of each counter named in ARGV[2..]} (for the partitions' copies).
if redis.call('EXISTS', KEYS[1]) == 0 then
  local t = redis.call('TIME')
  local base = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
  for i = 2, #ARGV do
    redis.call('HSET', KEYS[1], ARGV[i], base)
  end
end
local bumped = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
local out = {bumped}
for i = 2, #ARGV do
  out[i] = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or 0)
end
return out
