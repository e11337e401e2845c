-- Store how ARGV[5]'s try of a pending delivery ended, appending the attempt.
-- (attempts.lua is prepended in store.go.)
-- KEYS[1] record hash
-- KEYS[2..3] (absent on Cluster) pending:{sender}, pending-since:{sender}
-- ARGV: 1 member, 2 key, 3 sender, 4 channel, 5 owner,
--       6 outcome: "delivered" | "retry" | "giveup" | "hold",
--       7 attempt (one line of JSON), 8 attempts kept at most,
--       9 retry in ms (retry), 10 replace the response "1"/"0" (delivered),
--       11 status, 12 headers, 13 body, 14 truncated "1"/"0"
-- Returns 0 when the owner does not hold the delivery, the next try's time
-- (ms) for a retry, -1 when the delivery is over.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rec, owner, outcome = KEYS[1], ARGV[5], ARGV[6]
local cur = redis.call('HMGET', rec, 'p_since', 'p_owner', 'ea', 'at')
if owner == '' or (tonumber(cur[1]) or 0) == 0 or cur[2] ~= owner then return 0 end
append_attempt(rec, cur[4], ARGV[7], ARGV[8])
if outcome == 'retry' then
  local nx = now + tonumber(ARGV[9])
  redis.call('HSET', rec, 'p_next', nx, 'p_owner', '', 'p_lease', 0)
  redis.call('HINCRBY', rec, 'p_tries', 1)
  if #KEYS > 1 then redis.call('ZADD', KEYS[2], nx, ARGV[2]) end
  return nx
end
redis.call('HDEL', rec, 'p_since', 'p_next', 'p_until', 'p_tries', 'p_owner', 'p_lease')
local state = 'done'
if outcome == 'delivered' then
  redis.call('HSET', rec, 'ca', now)
  if ARGV[10] == '1' then
    redis.call('HSET', rec, 'rs', ARGV[11], 'rh', ARGV[12], 'rb', ARGV[13], 'rt', ARGV[14])
  end
else
  state = 'released'
  if outcome == 'hold' then state = 'unknown' end
  redis.call('HSET', rec, 'st', state, 'o', '', 'lu', 0, 'lo', owner)
  redis.call('HDEL', rec, 'ca', 'rs', 'rh', 'rb', 'rt')
end
if #KEYS > 1 then
  redis.call('ZREM', KEYS[2], ARGV[2])
  redis.call('ZREM', KEYS[3], ARGV[2])
end
-- Nothing is owed now: the record lives until its ttl (as Defer extended it).
redis.call('PEXPIREAT', rec, tonumber(cur[3]))
redis.call('PUBLISH', ARGV[4], state)
return -1
