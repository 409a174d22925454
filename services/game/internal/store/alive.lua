-- Record, at Redis' time, that a game process lives and reaches Redis: one
-- that dies leaves its last beat, from which a silence is dated
-- (renewlease.lua), rather than from the end of its lease.
-- KEYS[1] the processes' last beats: sorted set of process ids, scored by
--         the millisecond of each one's last beat
-- ARGV: 1 the process, 2 how long beats are kept in ms, 3 the most kept
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
-- Only the newest matter (a silence runs from the latest a process could
-- serve), and every renewal reads them all: a crash loop must not grow
-- them for a week. The live beat every second, so they stay among these.
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -1 - tonumber(ARGV[3]))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return now
