-- Raise a partition's copy of the version counters (backend/versions.py) to the given values, never lower
-- one: copies only grow, and two writers' raises in any order leave the larger value.
-- KEYS: 1 the copy (a hash); ARGV: pairs of counter name, value. Returns how many counters it raised.
local raised = 0
for i = 1, #ARGV, 2 do
  local value = tonumber(ARGV[i + 1])
  if tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or 0) < value then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    raised = raised + 1
  end
end
return raised
