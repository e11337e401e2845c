-- Add replay hits to a record that still exists.
-- KEYS[1] record hash; ARGV[1] count
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('HINCRBY', KEYS[1], 'hi', ARGV[1])
end
return 0
