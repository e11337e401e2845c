-- Cluster only (where the record's scripts cannot reach the pending indexes):
-- drop a delivery's entries from pending:{sender} and pending-since:{sender}.
-- KEYS[1] pending:{sender}, KEYS[2] pending-since:{sender}
-- ARGV: 1 key, 2 mode, 3 score
--   "eq":       the record owes nothing; drop only if the entry in KEYS[1]
--               still has the score read before (a Defer since has set a
--               newer one);
--   "since-eq": the same, judged by the entry in KEYS[2];
--   "settled":  the delivery was just settled or freed; drop only if its
--               entry in KEYS[2] is not newer than now (a Defer after it
--               writes a newer one);
--   "set":      a take, renewal or retry moved the delivery's next turn
--               to ARGV[3]: update the entry if it is still there.
local function same(k)
  local s = redis.call('ZSCORE', k, ARGV[1])
  return s and tonumber(s) == tonumber(ARGV[3])
end
local mode = ARGV[2]
if mode == 'set' then
  redis.call('ZADD', KEYS[1], 'XX', ARGV[3], ARGV[1])
  return 1
end
local drop = false
if mode == 'eq' then
  drop = same(KEYS[1])
elseif mode == 'since-eq' then
  drop = same(KEYS[2])
elseif mode == 'settled' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
  local s = redis.call('ZSCORE', KEYS[2], ARGV[1])
  drop = (not s) or tonumber(s) <= now
end
if drop then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 1
end
return 0
