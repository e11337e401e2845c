-- Extend the lease of the pending delivery ARGV[5] holds.
-- KEYS[1] record hash
-- KEYS[2] (absent on Cluster) pending:{sender}
-- ARGV: 1 member, 2 key, 3 sender, 4 channel, 5 owner, 6 lease ms
-- Returns the new lease's end (ms), or 0 when the owner does not hold it.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rec = KEYS[1]
local cur = redis.call('HMGET', rec, 'p_since', 'p_owner', 'p_until', 'ea')
if ARGV[5] == '' or (tonumber(cur[1]) or 0) == 0 or cur[2] ~= ARGV[5] then return 0 end
local lu = now + tonumber(ARGV[6])
redis.call('HSET', rec, 'p_lease', lu)
redis.call('PEXPIREAT', rec, math.max(tonumber(cur[4]) or 0, (tonumber(cur[3]) or 0) + 3600000, lu))
if #KEYS > 1 then redis.call('ZADD', KEYS[2], lu, ARGV[2]) end
return lu
