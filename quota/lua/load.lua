-- Give an account its live balance: durable (SQL) + its unsynced stream entries - its open holds,
-- unless it has one already.
-- Fast path (ARGV[5] = '0'): refused when Redis is not the incarnation SQL last synced from (epoch), or
-- when the sync moved past the cursor the SQL value was read at. Locked path (ARGV[5] = '1', the caller
-- holds the SQL cursor row lock, so no batch can commit meanwhile): creates the epoch if needed.
-- KEYS: 1 live, 2 held, 3 stream, 4 synced cursor, 5 epoch
-- ARGV: 1 durable balance, 2 SQL cursor, 3 account field u|t, 4 account id, 5 locked 0|1,
--       6 SQL epoch (fast path) or a fresh epoch to create (locked path)
-- returns {1, live, epoch} | {-1} cursor moved (read SQL again) | {-2} epoch changed (load locked)
local epoch = redis.call('GET', KEYS[5])
local current = redis.call('GET', KEYS[1])
if current then return {1, tonumber(current), epoch or ''} end
if ARGV[5] == '1' then
  if not epoch then
    epoch = ARGV[6]
    redis.call('SET', KEYS[5], epoch)
  end
else
  if not epoch or epoch ~= ARGV[6] then return {-2} end
  local synced = redis.call('GET', KEYS[4])
  if synced and synced ~= ARGV[2] then return {-1} end
end
local start = '-'
if ARGV[2] ~= '0-0' then start = '(' .. ARGV[2] end
local pending = 0
local field, id = ARGV[3], ARGV[4]
for _, entry in ipairs(redis.call('XRANGE', KEYS[3], start, '+')) do
  local kind, usage = entry[2][1], entry[2][2]  -- "<user> <key> <limited> <channel> <amount> <ref>"
  local u, t, l, q = string.match(usage, '^(%S+) (%S+) (%S+) %S+ (%S+) ')
  if (field == 'u' and u == id) or (field == 't' and t == id) then
    if kind == 'adj' then
      pending = pending + tonumber(q)
    elseif field == 'u' or l == '1' then
      pending = pending - tonumber(q)
    end
  end
end
local value = tonumber(ARGV[1]) + pending - tonumber(redis.call('GET', KEYS[2]) or '0')
redis.call('SET', KEYS[1], value)
return {1, value, epoch}
