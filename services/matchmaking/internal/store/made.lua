-- Admit one thing a player makes (a game against the AI, an invite) under
-- a bound of so many in a sliding window, or say how long until room;
-- and, when the request has a fingerprint, hold its request id to it, so
-- that the same id cannot make another thing.
-- KEYS[1] zset: request id -> when it was admitted (ms)
-- KEYS[2] string: the fingerprint of the request id
-- ARGV: 1 request id, 2 now (ms), 3 window (ms), 4 the most in a window
--       (0: no bound), 5 fingerprint ("": none), 6 how long to keep it (ms)
-- Returns 0 when admitted (also a request admitted before: a retry), -1
-- when the request id was used with another fingerprint, else the
-- milliseconds until there is room.
local now, window, most = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local fp = ARGV[5]
if fp ~= '' then
  local held = redis.call('GET', KEYS[2])
  if held == fp then
    -- A retry, however long after: it makes nothing new.
    return 0
  elseif held then
    return -1
  end
end
if most > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
  if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
    local n = redis.call('ZCARD', KEYS[1])
    if n >= most then
      -- Room comes once all but most - 1 have left the window: with a
      -- bound lowered since, more than the oldest must leave.
      local e = redis.call('ZRANGE', KEYS[1], n - most, n - most, 'WITHSCORES')
      return math.max(1, tonumber(e[2]) + window - now)
    end
    redis.call('ZADD', KEYS[1], now, ARGV[1])
    redis.call('PEXPIRE', KEYS[1], window)
  end
end
if fp ~= '' then
  redis.call('SET', KEYS[2], fp, 'PX', ARGV[6])
end
return 0
