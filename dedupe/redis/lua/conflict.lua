-- Append a conflict to the sender's capped stream; the stream key lives as
-- long as its longest-lived entry.
-- KEYS[1] conflicts:{sender}; KEYS[2] (optional, absent on Cluster) senders
-- ARGV: 1 sender, 2 max length, 3 expires at ms, then field/value pairs
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(fields))
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ea = tonumber(ARGV[3])
local pttl = redis.call('PTTL', KEYS[1]) -- -1: no expiry yet
if ea > now and (pttl == -1 or (pttl >= 0 and now + pttl < ea)) then
  redis.call('PEXPIREAT', KEYS[1], ea)
end
if #KEYS > 1 then redis.call('SADD', KEYS[2], ARGV[1]) end
return id
