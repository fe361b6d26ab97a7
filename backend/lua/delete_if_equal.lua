-- Delete a key only if it still holds the given text (release a lock only by its owner).
-- KEYS: 1 the key; ARGV: 1 the expected text. Returns 1 when deleted, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
