-- Extend a lease only if its owner still holds it (quota/leases.py).
-- KEYS: 1 the lease; ARGV: 1 the owner's token, 2 the lease in ms. Returns 1 renewed | 0 not held.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
