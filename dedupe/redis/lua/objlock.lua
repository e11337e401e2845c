-- Take an object lock for ARGV[1], judging time by the server's clock: when
-- it is free, its holder's lease has ended, or ARGV[1] holds it already (the
-- lease is then set to ARGV[2] ms from now).
-- KEYS[1] object lock hash (o owner, lu lease until in Unix ms)
-- ARGV: 1 owner, 2 lease ms, 3 keep ms (how long a lock stays past its lease)
-- Returns 1 when ARGV[1] holds the object now, 0 (nothing written) otherwise.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('HMGET', KEYS[1], 'o', 'lu')
if cur[1] and cur[1] ~= ARGV[1] and (tonumber(cur[2]) or 0) > now then return 0 end
local lu = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'o', ARGV[1], 'lu', lu)
redis.call('PEXPIREAT', KEYS[1], lu + tonumber(ARGV[3]))
return 1
