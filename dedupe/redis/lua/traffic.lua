-- Adds traffic counters to one day's hash (dedupe.TrafficRecorder).
-- KEYS[1]: the day's hash. ARGV[1]: when it expires (Unix seconds).
-- Then per counter three values: its field (a JSON array of its labels),
-- the count to add, and the longest time at the site in ms.
-- Field "n"..labels holds the count, "m"..labels the longest time.
for i = 2, #ARGV, 3 do
  redis.call('HINCRBY', KEYS[1], 'n' .. ARGV[i], ARGV[i + 1])
  local mf = 'm' .. ARGV[i]
  local m = tonumber(ARGV[i + 2])
  if m > 0 and m > tonumber(redis.call('HGET', KEYS[1], mf) or '0') then
    redis.call('HSET', KEYS[1], mf, m)
  end
end
redis.call('EXPIREAT', KEYS[1], ARGV[1])
return 1
