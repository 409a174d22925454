-- Read one player's rating of a kind and its rank as one moment: a game
-- of theirs rated meanwhile cannot rank them behind their own new rating.
-- KEYS: 1 ratings, 2 games, 3 names, 4 aborts, 5 leaderboard (the kind's,
--       one slot)
-- ARGV: 1 player id
-- Returns {rating, games, name, aborts, rank}: each false when not kept,
-- rank 0 when the player is not on the board.
local p = ARGV[1]
local out = {
  redis.call('HGET', KEYS[1], p),
  redis.call('HGET', KEYS[2], p),
  redis.call('HGET', KEYS[3], p),
  redis.call('HGET', KEYS[4], p),
  0,
}
local score = redis.call('ZSCORE', KEYS[5], p)
if score then
  out[5] = redis.call('ZCOUNT', KEYS[5], '(' .. score, '+inf') + 1
end
return out
