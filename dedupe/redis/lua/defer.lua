-- Defer: turn ARGV[5]'s processing claim into a durable delivery. The record
-- becomes done with the acknowledgement as its response (owner and lease
-- cleared) and gets the pending fields (p_since, p_next, p_until, p_tries,
-- p_owner, p_lease; times in Unix ms by TIME).
-- KEYS[1] record hash
-- KEYS[2..4] (absent on Cluster) pending:{sender}, pending-since:{sender}, exp
-- ARGV: 1 member, 2 key, 3 sender, 4 channel, 5 owner,
--       6 status, 7 headers, 8 body, 9 truncated "1"/"0",
--       10 retry_for ms, 11 lease ms (0: due at once for any deliverer)
-- Returns 1 when deferred, 0 when the owner does not hold the claim.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rec, owner = KEYS[1], ARGV[5]
local cur = redis.call('HMGET', rec, 'st', 'o', 'ea')
if owner == '' or cur[1] ~= 'processing' or cur[2] ~= owner then return 0 end
local untl = now + tonumber(ARGV[10])
local ea = math.max(tonumber(cur[3]) or 0, untl)
local po, pl = '', 0
if tonumber(ARGV[11]) > 0 then po, pl = owner, now + tonumber(ARGV[11]) end
-- No 'lo': a Complete by the claim's owner, which would take a done record
-- with lo = owner for its own lost reply, finds no claim (ErrNotOwner).
redis.call('HSET', rec, 'st', 'done', 'o', '', 'lu', 0, 'ca', now, 'ea', ea,
  'rs', ARGV[6], 'rh', ARGV[7], 'rb', ARGV[8], 'rt', ARGV[9],
  'p_since', now, 'p_next', now, 'p_until', untl, 'p_tries', 0, 'p_owner', po, 'p_lease', pl)
-- Kept an hour past the end of the delivery, so that a try still under way
-- at p_until can be settled.
redis.call('PEXPIREAT', rec, math.max(ea, untl + 3600000, pl))
if #KEYS > 1 then
  redis.call('ZADD', KEYS[2], math.max(now, pl), ARGV[2])
  redis.call('ZADD', KEYS[3], now, ARGV[2])
  redis.call('ZADD', KEYS[4], ea, ARGV[1])
end
redis.call('PUBLISH', ARGV[4], 'done')
return 1
