-- GCRA over several limits in one atomic step, on the server's clock (see quota/backends/base.py).
-- Without force: every limit is checked first, and only when all of them admit is each one charged;
-- a refusal changes nothing. With force: every limit is charged, even past it (after-the-fact usage).
--
-- A key holds its theoretical arrival time (TAT): whole nanoseconds since the epoch, as a decimal string.
-- A Lua number (a double) cannot hold that exactly, so it is read as seconds + nanoseconds and all the
-- arithmetic is on offsets from now, exact up to 2^53 ns (≈ 104 days). A key expires when its TAT passes.
--
-- KEYS[i]                limit i's TAT
-- ARGV[1]                '1' force, '0' check all then charge all or nothing
-- ARGV[2]                how far a forced charge may push a TAT ahead of now, ns (one period if longer)
-- ARGV[3i .. 3i+2]       limit i: emission interval ns (period / count, whole ≥ 1), count (the burst), cost
--                        (cost 0 = peek: refused unless one unit is free, never charged)
-- returns {allowed 0|1, remaining, retry_after ns, i of the refusing limit with the longest wait or 0}
--         remaining: the minimum over the limits of the units left after the charge (allowed) or free
--         now (refused)
local force = ARGV[1] == '1'
local max_ahead = tonumber(ARGV[2])
local E9 = 1000000000
local MAX_WAIT = 9007199254740992  -- 2^53 ns: a reply integer; only a cost above the count gets there
local t = redis.call('TIME')
local now_s = tonumber(t[1])
local now_ns = tonumber(t[2]) * 1000

local n = #KEYS
local after = {}       -- TAT − now once charged, ns
local left = nil       -- minimum units left after the charge
local free = nil       -- minimum units free now
local retry = 0
local refused_by = 0

for i = 1, n do
  local interval = tonumber(ARGV[3 * i])
  local count = tonumber(ARGV[3 * i + 1])
  local cost = tonumber(ARGV[3 * i + 2])
  local burst = count * interval

  local ahead = 0      -- TAT − now, ns (a TAT in the past counts as now)
  local stored = redis.call('GET', KEYS[i])
  if stored and #stored > 9 then
    local s = tonumber(string.sub(stored, 1, -10))
    local ns = tonumber(string.sub(stored, -9))
    if s and ns then
      ahead = (s - now_s) * E9 + (ns - now_ns)
      if ahead < 0 then ahead = 0 end
    end
  end

  local free_i = math.floor((burst - ahead) / interval)
  if free_i < 0 then free_i = 0 end
  if free == nil or free_i < free then free = free_i end

  local need = cost
  if need < 1 then need = 1 end
  local wait = ahead + interval * need - burst
  if wait > MAX_WAIT then wait = MAX_WAIT end
  if not force and wait > 0 then
    if wait > retry then
      retry = wait
      refused_by = i
    end
  else
    local a = ahead + interval * cost
    if force then
      local cap = max_ahead
      if burst > cap then cap = burst end
      if a > cap then a = cap end
    end
    after[i] = a
    local left_i = math.floor((burst - a) / interval)
    if left_i < 0 then left_i = 0 end
    if left == nil or left_i < left then left = left_i end
  end
end

if refused_by > 0 then
  return {0, free, retry, refused_by}
end

for i = 1, n do
  if tonumber(ARGV[3 * i + 2]) > 0 then
    local a = after[i]
    local total = now_ns + a
    local carry = math.floor(total / E9)
    local tat = string.format('%d%09d', now_s + carry, total - carry * E9)
    redis.call('SET', KEYS[i], tat, 'PX', math.ceil(a / 1000000))
  end
end
return {1, left, 0, 0}
