-- Claim a lease found run out, so that one process releases its seats. The
-- claim is a lease of its own ("claim:<proc>"), not a removal: a claimant
-- that dies, or loses Redis, before it has released everything leaves a
-- claim that runs out in turn, and another process finishes the release.
-- KEYS[1] the leases: sorted set of process ids and claims, scored by the
--         millisecond each runs out
-- ARGV: 1 the entry found run out (a process id, or "claim:" .. id),
--       2 now in ms, 3 the claim's end in ms
-- Returns the process whose seats to release, or false.
local entry = ARGV[1]
local score = redis.call('ZSCORE', KEYS[1], entry)
if not score or tonumber(score) >= tonumber(ARGV[2]) then
  return false -- renewed, or claimed by another
end
local proc = entry
if string.sub(entry, 1, 6) == 'claim:' then
  proc = string.sub(entry, 7)
  if redis.call('ZSCORE', KEYS[1], proc) then
    -- The process came back: nothing to finish. The claim is left for
    -- the process's own renewal to end (renewlease.lua), which has it
    -- hold its seats again, those the release let go included.
    return false
  end
else
  redis.call('ZREM', KEYS[1], entry)
end
redis.call('ZADD', KEYS[1], ARGV[3], 'claim:' .. proc)
return proc
