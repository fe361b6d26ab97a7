-- GCRA (generic cell rate algorithm) with a cost argument, on the server's clock.
-- All times are whole microseconds, which a Lua number (a double) holds exactly: fractional milliseconds
-- (1 s / 3) would make the last unit of a burst miss by a rounding error.
-- KEYS[1]  theoretical arrival time (µs) of the key
-- ARGV[1]  emission interval in µs (period / limit, a whole number ≥ 1)
-- ARGV[2]  burst: how many units may arrive at once (= limit)
-- ARGV[3]  cost of this request in units
-- returns  {allowed 0|1, remaining units, retry_after µs}
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2]) * interval
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]))
if not tat or tat < now then
  tat = now
end
local new_tat = tat + interval * cost
local diff = now - (new_tat - burst)
if diff < 0 then
  local remaining = math.floor((now - (tat - burst)) / interval)
  if remaining < 0 then remaining = 0 end
  return {0, remaining, -diff}
end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000))
return {1, math.floor(diff / interval), 0}
