-- A release under way keeps its claim on a process's lease until it is
-- over: a process back meanwhile holds its seats again at every renewal
-- that finds the claim, and ends it only once it ran out, after the
-- release's last commit.
-- KEYS[1] the leases; ARGV 1 the process, 2 the claim's end in ms
-- Returns 1 to go on, 0 if the claim is gone and the process not back
-- (another release ended it).
local claim = 'claim:' .. ARGV[1]
if redis.call('ZSCORE', KEYS[1], ARGV[1]) or redis.call('ZSCORE', KEYS[1], claim) then
  redis.call('ZADD', KEYS[1], ARGV[2], claim)
  return 1
end
return 0
