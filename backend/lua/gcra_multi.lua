-- GCRA over several limits in one atomic step, on the server's clock (see backend/base.py); the
-- arithmetic is gcra.lua's. Without force: every limit is checked first, and only when all of them admit is
-- each one charged; a refusal changes nothing. With force: every limit is charged, even past it
-- (after-the-fact usage). A key expires when its TAT passes.
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
local now_s, now_ns = gcra_now()

local after = {}       -- TAT − now once charged, ns
local left = nil       -- minimum units left after the charge
local free = nil       -- minimum units free now
local retry = 0
local refused_by = 0

for i = 1, #KEYS do
  local interval = tonumber(ARGV[3 * i])
  local count = tonumber(ARGV[3 * i + 1])
  local cost = tonumber(ARGV[3 * i + 2])
  local ahead = gcra_ahead(KEYS[i], now_s, now_ns)
  local free_i, wait = gcra_check(ahead, interval, count, cost)
  if free == nil or free_i < free then free = free_i end
  if not force and wait > 0 then
    if wait > retry then
      retry = wait
      refused_by = i
    end
  else
    local a = ahead + interval * cost
    if force then a = gcra_forced(ahead, interval, count, cost, max_ahead) end
    after[i] = a
    local left_i = gcra_left(a, interval, count)
    if left == nil or left_i < left then left = left_i end
  end
end

if refused_by > 0 then
  return {0, free, retry, refused_by}
end

for i = 1, #KEYS do
  if tonumber(ARGV[3 * i + 2]) > 0 then gcra_store(KEYS[i], now_s, now_ns, after[i]) end
end
return {1, left, 0, 0}
