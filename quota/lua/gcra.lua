-- GCRA (generic cell rate algorithm) with a cost argument, on the server's clock.
-- KEYS[1]  theoretical arrival time (ms) of the key
-- ARGV[1]  emission interval in ms (period / limit)
-- ARGV[2]  burst: how many units may arrive at once (= limit)
-- ARGV[3]  cost of this request in units
-- returns  {allowed 0|1, remaining units, retry_after ms}
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tat = tonumber(redis.call('GET', KEYS[1]))
if not tat or tat < now then
  tat = now
end
local new_tat = tat + interval * cost
local allow_at = new_tat - burst * interval
local diff = now - allow_at
if diff < 0 then
  local remaining = math.floor((now - (tat - burst * interval)) / interval)
  if remaining < 0 then remaining = 0 end
  return {0, remaining, math.ceil(-diff)}
end
redis.call('SET', KEYS[1], tostring(new_tat), 'PX', math.max(1, math.ceil(new_tat - now)))
return {1, math.floor(diff / interval), 0}
