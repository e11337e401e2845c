-- The entries of pending:{sender} whose score is not after the server's now,
-- lowest score first, with their scores.
-- KEYS[1] pending:{sender}
-- ARGV: 1 offset, 2 count
local t = redis.call('TIME')
local now = string.format('%d.%03d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), tonumber(t[2]) % 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', ARGV[1], ARGV[2])
