-- Store a shared copy of a record only if no change was announced since it was read from SQL.
-- KEYS: 1 the copy, 2 versions hash; ARGV: 1 text, 2 ttl ms, 3 counter name, 4 its value when the
-- reader started ('' = absent). Returns 1 when stored, 0 when the counter moved (the copy may be stale).
local now = redis.call('HGET', KEYS[2], ARGV[3]) or ''
if now ~= ARGV[4] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
