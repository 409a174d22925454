-- Commit one command of one game, all or nothing.
-- KEYS[1] state hash, KEYS[2] event stream, KEYS[3] moves list
-- ARGV[1] expected version ("0": the game must not exist)
-- ARGV[2] new version, ARGV[3] state
-- ARGV[4] request field ("" for none), ARGV[5] response to remember
-- ARGV[6] expiry in milliseconds to set on every key (0: keep the current one)
-- ARGV[7] channel, ARGV[8] notification; an empty channel: the caller
--   publishes once replicas confirm the commit, and waits for them on a
--   retry too (see below)
-- ARGV[9] moves to keep ("-1": all of them), ARGV[10] n, moves appended
-- ARGV[11] expected stamp ("": none), ARGV[12] new stamp
-- ARGV[13] the judgment (unix ms) at which the commit begins a turn ("":
--   none), ARGV[14] the hold (ms) from which that turn is excused it
-- ARGV[15..14+n] the appended moves
-- ARGV[15+n..] events, numbered from expected+1
-- Returns {'ok', hold} (hold: "start:ms" as written to field x, or ""),
-- {'dup', answer, version} or {'conflict', version}.
local got
if ARGV[4] ~= '' then
  got = redis.call('HMGET', KEYS[1], 'v', 'n', ARGV[4])
  if got[3] then
    if ARGV[7] == '' and got[1] then
      -- The caller's WAIT is documented to cover only what its own
      -- connection wrote, and the answer may have been written by another,
      -- unconfirmed: a write of its own, changing nothing, makes the wait
      -- cover the answer. (Redis 7.0 happens to make a script that writes
      -- nothing cover everything before it; nothing promises that.)
      redis.call('HSET', KEYS[1], 'v', got[1])
    end
    return {'dup', got[3], got[1]}
  end
else
  got = redis.call('HMGET', KEYS[1], 'v', 'n')
end
local cur = got[1] or '0'
-- The stamp too: the same version reached by another history (a lost
-- commit) is another game.
if cur ~= ARGV[1] or (got[2] or '') ~= ARGV[11] then
  return {'conflict', cur}
end
local n = tonumber(ARGV[10])
local set = {'v', ARGV[2], 'n', ARGV[12], 's', ARGV[3]}
if ARGV[4] ~= '' then
  set[#set + 1], set[#set + 2] = ARGV[4], ARGV[5]
end
local hold = ''
if ARGV[13] ~= '' then
  -- A turn that began at the judgment, before anyone could see the move,
  -- is excused what the commit was held since, by whichever process
  -- judges it next: measured by Redis' clock, to which the processes'
  -- own are anchored.
  local t = redis.call('TIME')
  local held = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(ARGV[13])
  if held >= tonumber(ARGV[14]) then
    hold = ARGV[13] .. ':' .. held
    set[#set + 1], set[#set + 2] = 'x', hold
  end
  if ARGV[7] == '' then
    -- Nobody sees the move before replicas confirm it: the confirmation
    -- measures the hold again (confirmed.lua).
    set[#set + 1], set[#set + 2] = 'b', ARGV[13] .. ':' .. ARGV[2]
  end
end
if #ARGV >= 15 + n then
  -- The commit logs events: its stamp marks the log's head.
  set[#set + 1], set[#set + 2] = 'h', ARGV[12]
end
redis.call('HSET', KEYS[1], unpack(set))
local keep = tonumber(ARGV[9])
if keep == 0 then
  redis.call('DEL', KEYS[3])
elseif keep > 0 then
  redis.call('LTRIM', KEYS[3], 0, keep - 1)
end
local created = false
if n > 0 then
  created = redis.call('RPUSH', KEYS[3], unpack(ARGV, 15, 14 + n)) == n
end
local v = tonumber(ARGV[1])
for i = 15 + n, #ARGV do
  v = v + 1
  redis.call('XADD', KEYS[2], v .. '-1', 'e', ARGV[i])
end
local ttl = tonumber(ARGV[6])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('PEXPIRE', KEYS[3], ttl)
elseif created then
  -- A new list of moves lives as long as the rest of the game.
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then
    redis.call('PEXPIRE', KEYS[3], left)
  end
end
-- A commit without events (who holds a connected seat, a wake-up) has
-- nothing for the streams: a notification would have every stream of the
-- game read the log for nothing.
if ARGV[7] ~= '' and #ARGV >= 15 + n then
  redis.call('PUBLISH', ARGV[7], ARGV[8])
end
return {'ok', hold}
