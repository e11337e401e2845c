-- Mark one conflict accepted, once: the first caller sets its field, every
-- later one finds it set. The hash lives as long as its longest-lived
-- conflict.
-- KEYS[1] accepted:{sender}
-- ARGV: 1 stream id of the conflict, 2 who accepts, 3 the conflict's expiry (ms)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HSETNX', KEYS[1], ARGV[1], now .. ' ' .. ARGV[2]) == 0 then
  return {0, redis.call('HGET', KEYS[1], ARGV[1])}
end
local ea = tonumber(ARGV[3])
local pttl = redis.call('PTTL', KEYS[1])
if ea > now and (pttl == -1 or (pttl >= 0 and now + pttl < ea)) then
  redis.call('PEXPIREAT', KEYS[1], ea)
end
return {1, now .. ' ' .. ARGV[2]}
