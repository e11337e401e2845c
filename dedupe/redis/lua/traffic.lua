-- Adds traffic counters to one day's hash (dedupe.TrafficRecorder).
-- KEYS[1]: the day's hash. ARGV[1]: when it expires (Unix seconds).
-- ARGV[2]: the most shapes kept per group (dedupe.MaxTrafficShapes).
-- Then per counter five values: its field (a JSON array of its labels);
-- its group (a JSON array of day's sender, path and outcome) when its
-- detail is a shape, else ""; the field of its group's "other shapes"
-- counter; the count to add; the longest time at the site in ms.
-- Field "n"..labels holds the count, "m"..labels the longest time, and
-- "g"..group how many shapes of the group the hash keeps: a shape not yet
-- kept once the group keeps the most is added to the "other" counter, so
-- the hash has a bounded number of fields whatever the clients send.
local most = tonumber(ARGV[2])
for i = 3, #ARGV, 5 do
  local f = ARGV[i]
  local g = ARGV[i + 1]
  if g ~= '' and redis.call('HEXISTS', KEYS[1], 'n' .. f) == 0 then
    if tonumber(redis.call('HGET', KEYS[1], 'g' .. g) or '0') < most then
      redis.call('HINCRBY', KEYS[1], 'g' .. g, 1)
    else
      f = ARGV[i + 2]
    end
  end
  redis.call('HINCRBY', KEYS[1], 'n' .. f, ARGV[i + 3])
  local mf = 'm' .. f
  local m = tonumber(ARGV[i + 4])
  if m > 0 and m > tonumber(redis.call('HGET', KEYS[1], mf) or '0') then
    redis.call('HSET', KEYS[1], mf, m)
  end
end
redis.call('EXPIREAT', KEYS[1], ARGV[1])
return 1
