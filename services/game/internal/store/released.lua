-- End a release of a process's seats that went through. A process that
-- came back meanwhile (its lease is there again) is not forgotten: its
-- claim is left run out, so that its next renewal holds its seats again
-- (renewlease.lua), those the release let go and those its list lost
-- included, and then ends the claim.
-- KEYS[1] the leases: sorted set of process ids and claims, scored by the
--         millisecond each runs out
-- ARGV: 1 the process, 2 what to do with the claim if the process is not
--       back: "end" it, leave it "runout" for a later round to release
--       what the process still lists, or "" keep it as it is
-- Returns 1 if the process came back, 0 if not.
local claim = 'claim:' .. ARGV[1]
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], 0, claim)
  return 1
end
if ARGV[2] == 'end' then
  redis.call('ZREM', KEYS[1], claim)
elseif ARGV[2] == 'runout' then
  redis.call('ZADD', KEYS[1], 0, claim)
end
return 0
