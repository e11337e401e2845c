-- Remove a record: forget by an operator, or purge.
-- KEYS[1] record hash
-- KEYS[2..6] (optional, absent on Cluster) idx:{sender}, idx, exp,
--            pending:{sender}, pending-since:{sender}
-- ARGV: 1 member, 2 key, 3 sender, 4 channel,
--       5 mode: "forget" | "expired" | "before"
--       6 cut in ms (before)
-- Returns "removed", "gone" (no record; index entries dropped) or "kept"
-- (a live lease, not past its ttl, or a durable delivery still owed: purge
-- never removes one, whatever its ttl; forget does). A released record is
-- removed like any other: it holds no lease.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rec, mode = KEYS[1], ARGV[5]

local function unindex()
  if #KEYS > 1 then
    redis.call('ZREM', KEYS[2], ARGV[2])
    redis.call('ZREM', KEYS[3], ARGV[1])
    redis.call('ZREM', KEYS[4], ARGV[1])
    redis.call('ZREM', KEYS[5], ARGV[2])
    redis.call('ZREM', KEYS[6], ARGV[2])
  end
end

local cur = redis.call('HMGET', rec, 'st', 'o', 'lu', 'ea', 'ra', 'p_since')
if not cur[1] then
  if mode ~= 'forget' then unindex() end
  return 'gone'
end
local st = cur[1]
local lu, ea, ra = tonumber(cur[3]) or 0, tonumber(cur[4]) or 0, tonumber(cur[5]) or 0
if mode == 'expired' or mode == 'before' then
  if st == 'processing' and lu > now then return 'kept' end
  if (tonumber(cur[6]) or 0) > 0 then return 'kept' end
  if mode == 'expired' and ea > now then return 'kept' end
  if mode == 'before' and ra >= tonumber(ARGV[6]) then return 'kept' end
end
redis.call('DEL', rec)
unindex()
redis.call('PUBLISH', ARGV[4], 'removed')
return 'removed'
