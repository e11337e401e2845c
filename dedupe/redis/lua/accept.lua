-- Mark one conflict accepted, once per conflict and once per payload: the
-- first caller sets the conflict's field, every later one finds it set;
-- and a conflict whose payload (key and received hash: the payload field)
-- another accepted conflict of the key has is refused with that one's id.
-- The hash lives as long as its longest-lived conflict.
-- KEYS[1] accepted:{sender}
-- ARGV: 1 stream id of the conflict, 2 who accepts, 3 the conflict's expiry (ms),
--       4 the payload field (p:<received hash>:<key>)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local own = redis.call('HGET', KEYS[1], ARGV[1])
if own then
  return {0, own}
end
local first = redis.call('HGET', KEYS[1], ARGV[4])
if first and first ~= ARGV[1] and redis.call('HEXISTS', KEYS[1], first) == 1 then
  return {2, first}
end
redis.call('HSET', KEYS[1], ARGV[1], now .. ' ' .. ARGV[2], ARGV[4], ARGV[1])
local ea = tonumber(ARGV[3])
local pttl = redis.call('PTTL', KEYS[1])
if ea > now and (pttl == -1 or (pttl >= 0 and now + pttl < ea)) then
  redis.call('PEXPIREAT', KEYS[1], ea)
end
return {1, now .. ' ' .. ARGV[2]}
