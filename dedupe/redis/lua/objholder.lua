-- The holder of an object lock whose lease is live by the server's clock, or
-- '' (free, or its lease ended): what WaitChange waits on for an object.
-- KEYS[1] object lock hash
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('HMGET', KEYS[1], 'o', 'lu')
if cur[1] and (tonumber(cur[2]) or 0) > now then return cur[1] end
return ''
