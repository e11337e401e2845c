-- The operator's release: whatever its state or owner, the record becomes
-- released (owner, lease and stored answer cleared), with the attempt in
-- ARGV[5] appended; its payload hash, kept request and attempts stay. A
-- durable delivery still owed is dropped with it (pending fields and entries).
-- KEYS[1] record hash
-- KEYS[2..3] (absent on Cluster) pending:{sender}, pending-since:{sender}
-- ARGV: 1 member, 2 key, 3 sender, 4 channel,
--       5 attempt (one line of JSON), 6 attempts kept at most
-- Returns the state the record was in, or false when there is none.
local rec = KEYS[1]
local cur = redis.call('HMGET', rec, 'st', 'ea', 'at')
if not cur[1] then return false end
redis.call('HSET', rec, 'st', 'released', 'o', '', 'lu', 0)
redis.call('HDEL', rec, 'lo', 'ca', 'rs', 'rh', 'rb', 'rt',
  'p_since', 'p_next', 'p_until', 'p_tries', 'p_owner', 'p_lease')
if #KEYS > 1 then
  redis.call('ZREM', KEYS[2], ARGV[2])
  redis.call('ZREM', KEYS[3], ARGV[2])
end
append_attempt(rec, cur[3], ARGV[5], ARGV[6])
-- No lease keeps the record now: it lives until its ttl.
redis.call('PEXPIREAT', rec, tonumber(cur[2]))
redis.call('PUBLISH', ARGV[4], 'released')
return cur[1]
