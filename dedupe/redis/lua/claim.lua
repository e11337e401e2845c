-- Claim one delivery atomically, judging time by the server's clock.
-- KEYS[1]  record hash
-- KEYS[2..5] (optional, absent on Cluster) idx:{sender}, idx, exp, senders
-- ARGV: 1 member "sender:key", 2 key, 3 sender, 4 channel,
--       5 payload hash, 6 owner, 7 lease ms, 8 ttl ms,
--       9 keep request body "1"/"0", 10 request body,
--       11 keep request head "1"/"0", 12 request head (JSON),
--       13 fingerprint ("" for none)
-- Returns {outcome, field, value, ...} (the record after the claim).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rec = KEYS[1]

local function out(outcome)
  local r = redis.call('HGETALL', rec)
  table.insert(r, 1, outcome)
  return r
end

-- (Re)writes the claim as new: this claim's hash, owner, lease, times and
-- request. Hits, takeovers and attempts are left as they are (absent on a
-- new record; a released record keeps its history).
local function own()
  local lu, ea = now + tonumber(ARGV[7]), now + tonumber(ARGV[8])
  redis.call('HSET', rec, 'st', 'processing', 'h', ARGV[5], 'o', ARGV[6], 'lu', lu, 'ra', now, 'ea', ea)
  redis.call('HDEL', rec, 'lo', 'ca', 'rs', 'rh', 'rb', 'rt', 'qb', 'qm', 'fp')
  if ARGV[9] == '1' then redis.call('HSET', rec, 'qb', ARGV[10]) end
  if ARGV[13] and ARGV[13] ~= '' then redis.call('HSET', rec, 'fp', ARGV[13]) end
  if ARGV[11] == '1' then redis.call('HSET', rec, 'qm', ARGV[12]) end
  redis.call('PEXPIREAT', rec, math.max(ea, lu))
  if #KEYS > 1 then
    redis.call('ZADD', KEYS[2], now, ARGV[2])
    redis.call('ZADD', KEYS[3], now, ARGV[1])
    redis.call('ZADD', KEYS[4], ea, ARGV[1])
    redis.call('SADD', KEYS[5], ARGV[3])
  end
  return out('claimed')
end

local cur = redis.call('HMGET', rec, 'st', 'h', 'o', 'lu', 'ea')
if cur[1] then
  local st, h, o = cur[1], cur[2], cur[3]
  local lu, ea = tonumber(cur[4]) or 0, tonumber(cur[5]) or 0
  local live = st == 'processing' and lu > now
  if now < ea or live then
    -- Released: the site failed and the claim was freed; the retry is new,
    -- whatever its payload, and the record keeps its attempts.
    if st == 'released' then return own() end
    if h ~= ARGV[5] then return out('conflict') end
    if st == 'done' then return out('duplicate') end
    if st == 'unknown' then return out('held') end
    -- A claim retried by the client after a lost reply finds its own owner
    -- (o written again, same value, so that a WAIT after it covers the
    -- first write too).
    if o == ARGV[6] then
      redis.call('HSET', rec, 'o', o)
      return out('claimed')
    end
    if live then return out('in_progress') end
    local newlu = now + tonumber(ARGV[7])
    redis.call('HSET', rec, 'o', ARGV[6], 'lu', newlu)
    redis.call('HINCRBY', rec, 'to', 1)
    redis.call('PEXPIREAT', rec, math.max(ea, newlu))
    return out('taken_over')
  end
  -- Past its ttl and no live lease: the key is new again.
  redis.call('DEL', rec)
end

redis.call('HSET', rec, 'hi', 0, 'to', 0)
return own()
