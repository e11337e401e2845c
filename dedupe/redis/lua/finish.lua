-- Complete or hold a processing claim that ARGV[6] owns.
-- KEYS[1] record hash
-- ARGV: 1 member, 2 key, 3 sender, 4 channel,
--       5 "done" | "unknown", 6 owner, 7 status, 8 headers, 9 body, 10 truncated "1"/"0"
-- Returns 1 when applied (or already applied by this owner), 0 when the owner
-- does not hold the claim.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rec = KEYS[1]
local cur = redis.call('HMGET', rec, 'st', 'o', 'lo', 'ea')
if not cur[1] then return 0 end
-- A retry of a write whose reply was lost finds it done by this owner.
if cur[1] == ARGV[5] and cur[3] == ARGV[6] then return 1 end
if cur[1] ~= 'processing' or cur[2] ~= ARGV[6] then return 0 end
if ARGV[5] == 'done' then
  redis.call('HSET', rec, 'st', 'done', 'o', '', 'lo', ARGV[6], 'lu', 0, 'ca', now,
    'rs', ARGV[7], 'rh', ARGV[8], 'rb', ARGV[9], 'rt', ARGV[10])
else
  redis.call('HSET', rec, 'st', 'unknown', 'o', '', 'lo', ARGV[6], 'lu', 0)
end
-- The lease no longer keeps the record: it lives until its ttl.
redis.call('PEXPIREAT', rec, tonumber(cur[4]))
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
