-- The game service's heartbeat, run by every replica about once a second:
-- KEYS[1] holds the Redis time (ms) of the last beat of any replica,
-- KEYS[2] the spans in which none beat ("from:to", scored by to).
-- ARGV[1]: the silence that counts as a span, in ms; ARGV[2]: how long
-- spans are kept, in ms; ARGV[3]: the time between beats, in ms: a span
-- begins when the beat after the last one was due. Returns the spans
-- kept.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prev = tonumber(redis.call('GET', KEYS[1]) or '0')
local keep = tonumber(ARGV[2])
redis.call('SET', KEYS[1], now, 'PX', keep)
if prev > 0 and now - prev >= tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[2], now, (prev + tonumber(ARGV[3])) .. ':' .. now)
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - keep)
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('PEXPIRE', KEYS[2], keep)
end
return redis.call('ZRANGE', KEYS[2], 0, -1)
