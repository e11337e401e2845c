-- Cluster only, before the Defer script (whose record lives in another
-- slot): index the delivery first, so that a process dying between the two
-- leaves a stale entry (dropped by TakeDue) rather than an owed delivery no
-- deliverer can find. Scores in ms with the microseconds as a fraction, so
-- that pendingdrop.lua's "eq" tells this entry from an older one.
-- KEYS[1] pending:{sender}, KEYS[2] pending-since:{sender}
-- ARGV: 1 key
local t = redis.call('TIME')
local now = string.format('%d.%03d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), tonumber(t[2]) % 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZADD', KEYS[2], now, ARGV[1])
return 1
