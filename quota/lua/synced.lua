-- The sync committed every entry up to ARGV[1]: publish that cursor (never moving it back) and trim.
-- KEYS: 1 synced cursor, 2 stream
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local current = redis.call('GET', KEYS[1])
if current then
  local cm, cs = parse(current)
  local nm, ns = parse(ARGV[1])
  if nm < cm or (nm == cm and ns <= cs) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('XTRIM', KEYS[2], 'MINID', ARGV[1])
return 1
