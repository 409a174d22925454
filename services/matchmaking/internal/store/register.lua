-- Register a pool (or refresh its last entry), unless it is new and the
-- registry already holds the most pools served.
-- KEYS[1] pool registry zset: pool id -> last entry ms
-- ARGV[1] pool id, ARGV[2] entry ms, ARGV[3] most pools (0: no bound).
-- Returns 1 when registered, 0 when refused.
local most = tonumber(ARGV[3])
if most > 0 and not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= most then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
