-- Renew a process's lease, and record a silence first if there was one:
-- a span in which no process of the service could serve, every one
-- stopped, dead or cut off from Redis, so that nobody could move. Another
-- process served until its lease ran out or, if sooner, a grace after its
-- last beat (alive.lua), which comes every second: a process that dies
-- leaves a lease far longer. One that beats without a lease served until
-- a grace after its last beat. One that never beat (of a release before
-- beats) served until the end of its lease: every release that keeps leases
-- counts, so the processes of a rollout or a rollback are never taken for
-- nobody. The renewing process itself served until the end of its own
-- lease. A silence is dated from the latest of these, or from the last
-- clean stop: what it leaves out (a grace after a crash, or a lease for a
-- process cut off) is charged. It ends no later than the renewing
-- process's own unbroken contact with Redis began, since from then on it
-- could serve: a renewal that is only late records nothing. If the
-- renewing process's contact broke since its last renewal, once or more,
-- it served until the first break (or its lease's end, if sooner) and
-- between the breaks: what of each break no other process served is a
-- silence of its own. Another process served then from its start (or
-- ever, if none is on record), up to the end above (one that stopped
-- cleanly, to its stop: Gone dates its last beat so), but for the breaks
-- it reported itself, in a beat or a renewal: processes cut off together
-- each count the others out, and the last to renew records what none
-- served. The renewing process reports its breaks.
-- KEYS[1] the leases: sorted set of process ids and claims, scored by the
--         millisecond each runs out
-- KEYS[2] the silences: sorted set of "from:to" (ms), scored by to
-- KEYS[3] the millisecond the last process to stop cleanly stopped
-- KEYS[4] the processes' last beats (alive.lua)
-- KEYS[5] the processes' starts (alive.lua)
-- KEYS[6] the breaks processes reported: sorted set of
--         "process|from|to" (ms), or "process|from|u" under way, scored
--         by to
-- KEYS[7] "<ms>|<process>" of the last clean stop (stopped.lua)
-- ARGV: 1 the process, 2 its lease's new end in ms, 3 now in ms (Redis'
--       own time if earlier), 4 how long silences are kept in ms, 5 the
--       most kept, 6 return the silences that end after this ms, 7 the
--       latest a silence recorded now may end, in ms, 8 the grace after a
--       process's last beat, in ms, 9 the most breaks kept; then for
--       each break in the renewing
--       process's contact since its last renewal, oldest first: the latest
--       it served before the break, and when its contact began again (0:
--       the contact under way, ARGV[7]), in ms
-- Returns {1 if the lease was not there or a claim on it was (2 if this
-- very renewal may have run before, see below), the
-- silences recorded ("from:to" separated by spaces, "" for none), the
-- silences that end after ARGV[6]...}.
local t = redis.call('TIME')
local now = math.min(tonumber(ARGV[3]), tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
local keep = tonumber(ARGV[4])
local me = ARGV[1]
-- How long each other process served: until its lease ran out, or a grace
-- after its last beat if sooner; one without a lease, until that grace.
local ends = {}
local beats = redis.call('ZRANGE', KEYS[4], 0, -1, 'WITHSCORES')
for i = 1, #beats, 2 do
  if beats[i] ~= me then
    ends[beats[i]] = tonumber(beats[i + 1]) + tonumber(ARGV[8])
  end
end
local own = 0
-- A claim on a lease is held by a process with a lease of its own.
local leases = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #leases, 2 do
  if leases[i] == me then
    own = tonumber(leases[i + 1])
  elseif string.sub(leases[i], 1, 6) ~= 'claim:' and tonumber(leases[i + 1]) > 0 then
    -- A lease ended at 0 (EndLease) is left for a release: its process
    -- stopped when its last beat says (Gone).
    ends[leases[i]] = math.min(tonumber(leases[i + 1]), ends[leases[i]] or math.huge)
  end
end
local left = tonumber(redis.call('GET', KEYS[3]) or '0')
local from = left
for _, e in pairs(ends) do
  from = math.max(from, e)
end

-- subtract returns the parts of the spans pieces outside the spans cuts.
local function subtract(pieces, cuts)
  for _, c in ipairs(cuts) do
    local out = {}
    for _, p in ipairs(pieces) do
      if c[2] <= p[1] or c[1] >= p[2] then
        out[#out + 1] = p
      else
        if p[1] < c[1] then
          out[#out + 1] = {p[1], c[1]}
        end
        if c[2] < p[2] then
          out[#out + 1] = {c[2], p[2]}
        end
      end
    end
    pieces = out
  end
  return pieces
end

local contact = math.min(now, tonumber(ARGV[7]))
local spans = {}
if #ARGV < 10 then
  -- Nothing on record (the service's first start, or Redis lost its
  -- data) tells no silence.
  if math.max(from, own) > 0 then
    spans[1] = {math.max(from, own), contact}
  end
else
  local born = {}
  local births = redis.call('ZRANGE', KEYS[5], 0, -1, 'WITHSCORES')
  for i = 1, #births, 2 do
    born[births[i]] = tonumber(births[i + 1])
  end
  -- Only the breaks that end after the first of these begins.
  local first = math.huge
  for i = 10, #ARGV - 1, 2 do
    first = math.min(first, tonumber(ARGV[i]))
  end
  local gaps = {}
  local bs = redis.call('ZRANGEBYSCORE', KEYS[6], first, '+inf', 'WITHSCORES')
  for i = 1, #bs, 2 do
    -- "<proc>|<from>|<to>", or "<proc>|<from>|u" under way: to the score.
    local p, f = string.match(bs[i], '^(.*)|(%d+)|[%du]+$')
    if p and p ~= me then
      gaps[p] = gaps[p] or {}
      table.insert(gaps[p], {tonumber(f), tonumber(bs[i + 1])})
    end
  end
  -- A process that stopped cleanly served until its stop, as its last
  -- beat says (Gone): the last stop alone would count it serving through
  -- its own breaks.
  local served = {}
  -- A process of a release before this one that stopped last served until
  -- its stop, and left no beat to say so.
  local stopper = redis.call('GET', KEYS[7]) or ''
  local sms, sproc = string.match(stopper, '^(%d+)|(.*)$')
  if left > 0 and (tonumber(sms or '0') ~= left or not ends[sproc]) then
    served[1] = {0, left}
  end
  for p, e in pairs(ends) do
    for _, s in ipairs(subtract({{born[p] or 0, e}}, gaps[p] or {})) do
      served[#served + 1] = s
    end
  end
  for i = 10, #ARGV - 1, 2 do
    local s = tonumber(ARGV[i])
    if i == 10 and own > 0 then
      s = math.min(s, own)
    end
    local r = tonumber(ARGV[i + 1])
    if r == 0 or r > contact then
      r = contact
    end
    if s < r then
      for _, p in ipairs(subtract({{s, r}}, served)) do
        spans[#spans + 1] = p
      end
      redis.call('ZREM', KEYS[6], string.format('%s|%d|u', me, tonumber(ARGV[i])))
      redis.call('ZADD', KEYS[6], r, string.format('%s|%d|%d', me, s, r))
    end
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now - keep)
  redis.call('ZREMRANGEBYRANK', KEYS[6], 0, -1 - tonumber(ARGV[9]))
  if redis.call('EXISTS', KEYS[6]) == 1 then
    redis.call('PEXPIRE', KEYS[6], keep)
  end
end
local recorded = {}
for _, s in ipairs(spans) do
  local f, to = math.max(s[1], now - keep), s[2]
  if f < to then
    local text = string.format('%d:%d', f, to)
    redis.call('ZADD', KEYS[2], to, text)
    recorded[#recorded + 1] = text
  end
end
-- A renewal sent again by the client, its first answer lost, finds the
-- lease its first run made: whether that one was fresh is unknown, and it
-- answers 2, for the process to hold its seats again as if it were.
local before = redis.call('ZSCORE', KEYS[1], ARGV[1])
local fresh = redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
if before and tonumber(before) == tonumber(ARGV[2]) then
  fresh = 2
end
-- A claim on this process's lease is a release of its seats under way,
-- or one that stopped part way (failed, or its claimant died): the
-- process holds its seats again at every renewal that finds one, and
-- ends it once it has run out, for no later release will take it up.
local claim = redis.call('ZSCORE', KEYS[1], 'claim:' .. me)
if claim then
  fresh = 1
  if tonumber(claim) < now then
    redis.call('ZREM', KEYS[1], 'claim:' .. me)
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - keep)
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -1 - tonumber(ARGV[5]))
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('PEXPIRE', KEYS[2], keep)
end
local out = {fresh, table.concat(recorded, ' ')}
for _, s in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[6], '+inf')) do
  out[#out + 1] = s
end
return out
