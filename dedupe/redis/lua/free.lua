-- The operator's release: whatever its state or owner, the record becomes
-- released (owner, lease and stored answer cleared), with the attempt in
-- ARGV[5] appended; its payload hash, kept request and attempts stay.
-- KEYS[1] record hash
-- ARGV: 1 member, 2 key, 3 sender, 4 channel,
--       5 attempt (one line of JSON), 6 attempts kept at most
-- Returns the state the record was in, or false when there is none.
local rec = KEYS[1]
local cur = redis.call('HMGET', rec, 'st', 'ea', 'at')
if not cur[1] then return false end
redis.call('HSET', rec, 'st', 'released', 'o', '', 'lu', 0)
redis.call('HDEL', rec, 'lo', 'ca', 'rs', 'rh', 'rb', 'rt')
append_attempt(rec, cur[3], ARGV[5], ARGV[6])
-- No lease keeps the record now: it lives until its ttl.
redis.call('PEXPIREAT', rec, tonumber(cur[2]))
redis.call('PUBLISH', ARGV[4], 'released')
return cur[1]
