-- Increment a counter; set its expiry only when this call created it.
-- KEYS[1] counter; ARGV[1] ttl in ms. Returns the new value.
local v = redis.call('INCR', KEYS[1])
if v == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return v
