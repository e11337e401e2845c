-- Extend the lease of a processing claim that ARGV[5] owns.
-- KEYS[1] record hash
-- ARGV: 1 member, 2 key, 3 sender, 4 channel, 5 owner, 6 lease ms
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rec = KEYS[1]
local cur = redis.call('HMGET', rec, 'st', 'o', 'ea')
if cur[1] ~= 'processing' or cur[2] ~= ARGV[5] then return 0 end
local lu = now + tonumber(ARGV[6])
redis.call('HSET', rec, 'lu', lu)
redis.call('PEXPIREAT', rec, math.max(tonumber(cur[3]), lu))
return 1
