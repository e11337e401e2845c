-- Complete, hold or release a processing claim that ARGV[6] owns, appending
-- the attempt in the same step.
-- KEYS[1] record hash
-- ARGV: 1 member, 2 key, 3 sender, 4 channel,
--       5 "done" | "unknown" | "released", 6 owner,
--       7 status, 8 headers, 9 body, 10 truncated "1"/"0" (done only),
--       11 attempt (one line of JSON), 12 attempts kept at most
-- Returns 1 when applied (or, for done and unknown, already applied by this
-- owner), 0 when the owner does not hold the claim.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rec, state, owner = KEYS[1], ARGV[5], ARGV[6]
local cur = redis.call('HMGET', rec, 'st', 'o', 'lo', 'ea', 'at')
if not cur[1] then return 0 end
-- A retry of a write whose reply was lost finds it done by this owner. Not
-- for a release: a released record is claimable by anyone, so a second
-- release is refused (the caller treats that as "already free"). The retry
-- writes lo again (same value) so that a WAIT after it covers the first
-- write too: replication is one ordered stream, and WAIT counts from the
-- connection's last write.
if state ~= 'released' and cur[1] == state and cur[3] == owner then
  redis.call('HSET', rec, 'lo', owner)
  return 1
end
if cur[1] ~= 'processing' or cur[2] ~= owner then return 0 end
if state == 'done' then
  redis.call('HSET', rec, 'st', 'done', 'o', '', 'lo', owner, 'lu', 0, 'ca', now,
    'rs', ARGV[7], 'rh', ARGV[8], 'rb', ARGV[9], 'rt', ARGV[10])
else
  redis.call('HSET', rec, 'st', state, 'o', '', 'lo', owner, 'lu', 0)
end
append_attempt(rec, cur[5], ARGV[11], ARGV[12])
-- The lease no longer keeps the record: it lives until its ttl.
redis.call('PEXPIREAT', rec, tonumber(cur[4]))
redis.call('PUBLISH', ARGV[4], state)
return 1
