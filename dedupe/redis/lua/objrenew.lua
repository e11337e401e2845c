-- Extend the lease of an object lock that ARGV[1] holds (a lease that ended
-- with no one taking the object since still counts, as for claims).
-- KEYS[1] object lock hash
-- ARGV: 1 owner, 2 lease ms, 3 keep ms
-- Returns 1 when extended, 0 when ARGV[1] does not hold the object.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[1] then return 0 end
local lu = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'lu', lu)
redis.call('PEXPIREAT', KEYS[1], lu + tonumber(ARGV[3]))
return 1
