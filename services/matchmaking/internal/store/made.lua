-- Admit one thing a player makes (a game against the AI, an invite) under
-- a bound of so many in a sliding window, or say how long until room.
-- KEYS[1] zset: request id -> when it was admitted (ms)
-- ARGV: 1 request id, 2 now (ms), 3 window (ms), 4 the most in a window
-- Returns 0 when admitted (also a request admitted before: a retry),
-- else the milliseconds until the oldest leaves the window.
local now, window, most = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
if redis.call('ZCARD', KEYS[1]) >= most then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(oldest[2]) + window - now)
end
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('PEXPIRE', KEYS[1], window)
return 0
