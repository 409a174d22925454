-- Show a player's new display name on the leaderboard at once, not at
-- their next rated game, and note when it was given, so that the rating
-- of a game that began before (and names the player as they were then)
-- does not put the former name back (rate.lua). Every player who signs
-- in gets an entry, rated or not: one whose first rated game is under way
-- is shown the new name when it ends.
-- KEYS: 1 names hash of a kind, 2 hash of when each name was given (ms)
-- ARGV: 1 player id, 2 name, 3 when it was given (ms)
-- Returns 1 when the name or its time changed, else 0: a name given
-- later (a newer sign-in, a game made under one) stays.
local at = tonumber(ARGV[3])
local cur = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if cur > at then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return 1
