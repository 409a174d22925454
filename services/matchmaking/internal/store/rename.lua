-- Show a rated player's new display name on the leaderboard at once, not
-- at their next rated game. A player without a rating of the kind gets
-- no entry: the names hash holds rated players only.
-- KEYS: 1 names hash of a kind
-- ARGV: 1 player id, 2 name
-- Returns 1 when the name changed, else 0.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur or cur == ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
