-- Take one pending delivery for ARGV[5] if it is due and not held; judge it
-- by the record, whatever the score of its entry in pending:{sender} said.
-- KEYS[1] record hash
-- KEYS[2..3] (absent on Cluster) pending:{sender}, pending-since:{sender}
-- ARGV: 1 member, 2 key, 3 sender, 4 channel, 5 owner, 6 lease ms
-- Returns {"taken", field, value, ...} (the record after the take),
-- {"later", ms} (pending, due or free only at ms: the entry's right score),
-- {"busy"} (a processing claim without a delivery: perhaps one about to be
-- deferred, so the entry stays) or {"none"} (no delivery owed: the entry is
-- stale).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rec = KEYS[1]
local cur = redis.call('HMGET', rec, 'st', 'p_since', 'p_next', 'p_owner', 'p_lease', 'p_until', 'ea', 'lu')
if (tonumber(cur[2]) or 0) == 0 then
  if cur[1] == 'processing' then
    if #KEYS > 1 then
      -- Looked at again when the claim's lease ends, or in a second (a
      -- Defer sets the score it needs).
      redis.call('ZADD', KEYS[2], math.max(now + 1000, tonumber(cur[8]) or 0), ARGV[2])
    end
    return {'busy'}
  end
  if #KEYS > 1 then
    redis.call('ZREM', KEYS[2], ARGV[2])
    redis.call('ZREM', KEYS[3], ARGV[2])
  end
  return {'none'}
end
local nx, po, pl = tonumber(cur[3]) or 0, cur[4] or '', tonumber(cur[5]) or 0
local held = po ~= '' and pl > now
if nx > now or held then
  local at = nx
  if held and pl > at then at = pl end
  if #KEYS > 1 then redis.call('ZADD', KEYS[2], at, ARGV[2]) end
  return {'later', tostring(at)}
end
local lu = now + tonumber(ARGV[6])
redis.call('HSET', rec, 'p_owner', ARGV[5], 'p_lease', lu)
redis.call('PEXPIREAT', rec, math.max(tonumber(cur[7]) or 0, (tonumber(cur[6]) or 0) + 3600000, lu))
if #KEYS > 1 then redis.call('ZADD', KEYS[2], lu, ARGV[2]) end
local r = redis.call('HGETALL', rec)
table.insert(r, 1, 'taken')
return r
