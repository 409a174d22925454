-- Record, at Redis' time, that a game process lives and reaches Redis: one
-- that dies leaves its last beat, from which a silence is dated
-- (renewlease.lua), rather than from the end of its lease; and its start,
-- before which it served nothing; and the breaks in its contact with
-- Redis that no renewal has recorded yet, in which it served nothing
-- either, though it beats again.
-- KEYS[1] the processes' last beats: sorted set of process ids, scored by
--         the millisecond of each one's last beat
-- KEYS[2] the processes' starts, alike
-- KEYS[3] the breaks processes reported (renewlease.lua)
-- ARGV: 1 the process, 2 how long beats are kept in ms, 3 the most kept,
--       4 the process's start in ms; then for each break: the latest the
--       process served before it, and when its contact began again (0:
--       now), in ms
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZADD', KEYS[2], 'NX', ARGV[4], ARGV[1])
-- A break under way is one member, "<proc>|<from>|u", its end the score:
-- every beat in it moves its end, and adds nothing.
for i = 5, #ARGV - 1, 2 do
  local r = tonumber(ARGV[i + 1])
  if r == 0 then
    if tonumber(ARGV[i]) < now then
      redis.call('ZADD', KEYS[3], now, string.format('%s|%d|u', ARGV[1], tonumber(ARGV[i])))
    end
  elseif tonumber(ARGV[i]) < r then
    -- Its end known, the member of it under way goes.
    redis.call('ZREM', KEYS[3], string.format('%s|%d|u', ARGV[1], tonumber(ARGV[i])))
    redis.call('ZADD', KEYS[3], r, string.format('%s|%d|%d', ARGV[1], tonumber(ARGV[i]), r))
  end
end
-- Only the newest matter (a silence runs from the latest a process could
-- serve), and every renewal reads them all: a crash loop must not grow
-- them for a week. The live beat every second, so they stay among these;
-- a live process whose start is forgotten records it again at its next
-- beat.
for _, k in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', k, '-inf', now - tonumber(ARGV[2]))
  redis.call('ZREMRANGEBYRANK', k, 0, -1 - tonumber(ARGV[3]))
  redis.call('PEXPIRE', k, ARGV[2])
end
return now
