-- The GCRA arithmetic of the rate limits, one copy for every script that charges them (gcra_multi.lua,
-- quota/lua/reserve.lua, quota/lua/settle.lua): `load(name, "gcra")` (backend/lua/__init__.py, and
-- quota/lua/__init__.py, which finds it here) puts this file before the script.
--
-- A limit's key holds its theoretical arrival time (TAT): whole nanoseconds since the epoch, as a decimal
-- string. A Lua number (a double) cannot hold that exactly, so it is read as seconds + nanoseconds and all
-- the arithmetic is on offsets from now ("ahead" = TAT − now, ns), exact up to 2^53 ns (≈ 104 days).
-- A limit is (interval = emission interval ns, count = the burst); its burst window is count × interval.
local GCRA_E9 = 1000000000
local GCRA_MAX_WAIT = 9007199254740992  -- 2^53 ns: a reply integer; only a cost above the count gets there

-- The server's clock: seconds, and nanoseconds within the second.
local function gcra_now()
  local t = redis.call('TIME')
  return tonumber(t[1]), tonumber(t[2]) * 1000
end

-- TAT − now of the limit at `key`, ns; a TAT in the past (or none, or unreadable) counts as now: 0.
local function gcra_ahead(key, now_s, now_ns)
  local stored = redis.call('GET', key)
  if stored and #stored > 9 then
    local s = tonumber(string.sub(stored, 1, -10))
    local ns = tonumber(string.sub(stored, -9))
    if s and ns then
      local ahead = (s - now_s) * GCRA_E9 + (ns - now_ns)
      if ahead > 0 then return ahead end
    end
  end
  return 0
end

-- The units free now, and how long a charge of `cost` must wait (≤ 0: admitted now). A cost of 0 (a peek)
-- waits like a cost of 1 and is never charged.
local function gcra_check(ahead, interval, count, cost)
  local burst = count * interval
  local free = math.floor((burst - ahead) / interval)
  if free < 0 then free = 0 end
  local need = cost
  if need < 1 then need = 1 end
  local wait = ahead + interval * need - burst
  if wait > GCRA_MAX_WAIT then wait = GCRA_MAX_WAIT end
  return free, wait
end

-- The units left once `ahead` (after a charge) is stored.
local function gcra_left(ahead, interval, count)
  local left = math.floor((count * interval - ahead) / interval)
  if left < 0 then left = 0 end
  return left
end

-- "ahead" after a forced charge of `cost` (after-the-fact usage, charged even past the limit), pushed at
-- most max(`max_ahead`, the burst window) ahead of now.
local function gcra_forced(ahead, interval, count, cost, max_ahead)
  local a = ahead + interval * cost
  local cap = max_ahead
  if count * interval > cap then cap = count * interval end
  if a > cap then a = cap end
  return a
end

-- Store the TAT now + `ahead` at `key`; the key expires when the TAT passes.
local function gcra_store(key, now_s, now_ns, ahead)
  local total = now_ns + ahead
  local carry = math.floor(total / GCRA_E9)
  redis.call('SET', key, string.format('%d%09d', now_s + carry, total - carry * GCRA_E9),
    'PX', math.ceil(ahead / 1000000))
end

