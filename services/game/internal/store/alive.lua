-- Record, at Redis' time, that a game process lives and reaches Redis: one
-- that dies leaves its last beat, from which a silence is dated
-- (renewlease.lua), rather than from the end of its lease; and its first
-- beat, before which it served nothing.
-- KEYS[1] the processes' last beats: sorted set of process ids, scored by
--         the millisecond of each one's last beat
-- KEYS[2] the processes' first beats, alike
-- ARGV: 1 the process, 2 how long beats are kept in ms, 3 the most kept
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZADD', KEYS[2], 'NX', now, ARGV[1])
-- Only the newest matter (a silence runs from the latest a process could
-- serve), and every renewal reads them all: a crash loop must not grow
-- them for a week. The live beat every second, so they stay among these;
-- a live process whose first beat is forgotten counts as serving from
-- before any silence, as one of a release before first beats does.
for _, k in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', k, '-inf', now - tonumber(ARGV[2]))
  redis.call('ZREMRANGEBYRANK', k, 0, -1 - tonumber(ARGV[3]))
  redis.call('PEXPIRE', k, ARGV[2])
end
return now
