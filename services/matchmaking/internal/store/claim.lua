-- Claim up to ARGV[3] members of a zset whose score is at most ARGV[1] by
-- moving their score to ARGV[2]: a lease. Used for stalled game creations
-- and for pending rated games.
-- KEYS[1] the zset. Returns the claimed members.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[1], ARGV[2], id)
end
return ids
