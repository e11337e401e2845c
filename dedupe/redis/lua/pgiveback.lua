-- Give back a pending delivery ARGV[5] took but whose take the replicas did
-- not confirm (wait_replicas): due again at once, for any deliverer.
-- KEYS[1] record hash
-- KEYS[2] (absent on Cluster) pending:{sender}
-- ARGV: 1 member, 2 key, 3 sender, 4 channel, 5 owner
-- Returns 1 when given back, 0 when the owner does not hold it.
local rec = KEYS[1]
local cur = redis.call('HMGET', rec, 'p_since', 'p_owner', 'p_next')
if ARGV[5] == '' or (tonumber(cur[1]) or 0) == 0 or cur[2] ~= ARGV[5] then return 0 end
redis.call('HSET', rec, 'p_owner', '', 'p_lease', 0)
if #KEYS > 1 then redis.call('ZADD', KEYS[2], tonumber(cur[3]) or 0, ARGV[2]) end
return 1
