-- Note on a match the game made for it, before its players' lists name
-- the game, so that whoever gives the match up (void.lua) learns of the
-- game and undoes it, even if the replica that made it died. A match given
-- up, or gone, takes no game: nothing is told of it, so nothing may list
-- it.
-- KEYS[1] match
-- ARGV: 1 game id
-- Returns 1 when the game is noted (by this call or an earlier try), 0
-- when the match was given up or is gone.
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'void') == 1 then
  return 0
end
redis.call('HSETNX', KEYS[1], 'made', ARGV[1])
return 1
