-- Add a game to a player's list of the games matchmaking made for them,
-- once: a retried creation finds it listed and keeps its first time and
-- entry. Both keys share the player's hash tag.
-- KEYS[1] zset game id -> created ms, KEYS[2] hash game id -> entry
-- ARGV: 1 game id, 2 created ms, 3 entry, 4 most games kept, 5 keep ms
-- Returns {1 when the game was added or 0 when it was listed already,
-- the time it was listed first (ms)}.
local function drop(ids)
  if #ids > 0 then
    redis.call('ZREM', KEYS[1], unpack(ids))
    redis.call('HDEL', KEYS[2], unpack(ids))
  end
end
local added = redis.call('ZADD', KEYS[1], 'NX', ARGV[2], ARGV[1])
if added == 1 then
  -- The entry holds the time too: the two must agree.
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
else
  redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[3])
end
-- Each entry is kept for keep, as its game's record is, however often
-- the player plays since.
drop(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (tonumber(ARGV[2]) - tonumber(ARGV[5]))))
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[4])
if over > 0 then
  drop(redis.call('ZRANGE', KEYS[1], 0, over - 1))
end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return {added, redis.call('ZSCORE', KEYS[1], ARGV[1]) or ARGV[2]}
