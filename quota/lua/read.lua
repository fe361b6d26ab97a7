-- A batch for the sync, with the epoch (Redis incarnation) it was read under; creates the epoch if
-- this Redis has none yet. The sink applies the batch only if the epoch is still current. The store's
-- `read` runs this only when a plain XRANGE between two GETs of the epoch could not name one epoch (none
-- yet, or it changed meanwhile): through Lua every entry's strings are copied in and out of the script.
-- KEYS: 1 epoch, 2 stream; ARGV: 1 start ('-' or '(<id>'), 2 count, 3 a fresh epoch
local epoch = redis.call('GET', KEYS[1])
if not epoch then
  epoch = ARGV[3]
  redis.call('SET', KEYS[1], epoch)
end
return {epoch, redis.call('XRANGE', KEYS[2], ARGV[1], '+', 'COUNT', ARGV[2])}
