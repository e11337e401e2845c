-- Free an object lock that ARGV[1] holds (a lease that ended with no one
-- taking the object since still counts) and announce it to the waiters.
-- KEYS[1] object lock hash
-- ARGV: 1 owner, 2 channel (of the record ObjectSender(scope), object)
-- Returns 1 when freed, 0 (nothing written) when ARGV[1] does not hold it.
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], 'unlocked')
return 1
