-- Void a rated game made for a match given up, whose players were never
-- told of it: an ending settled later is neither rated nor counted (the
-- game's "done" marker says so, and rate.lua and abort.lua change nothing
-- for a marker they did not write), and an abort counted before the give
-- up is taken back. A game rated before it (played by players who found
-- it all the same) keeps its rating. Run again, it changes nothing.
-- KEYS: 1 aborts hash, 2 done marker of the game, 3 who the game was
--       counted against (abort.lua), 4.. the players' logs of recent
--       aborts
-- ARGV: 1 seconds to keep the done marker, 2 game id, 3.. the players,
--       in the order of their logs
-- Returns 1 when the game was voided before any settle, 2 when an abort
-- was taken back, 0 when there was nothing to void.
local done = redis.call('GET', KEYS[2])
if not done then
  redis.call('SET', KEYS[2], 'void', 'EX', ARGV[1])
  return 1
end
local player = redis.call('GET', KEYS[3])
if not player and done ~= 'void' and not string.find(done, '|', 1, true) then
  -- Counted by a release that named nobody (no KEYS[3]): the player is
  -- the one whose log holds the game, while it is in the window.
  for i = 4, #KEYS do
    if redis.call('ZSCORE', KEYS[i], ARGV[2]) then
      player = ARGV[i - 1]
    end
  end
end
if not player then
  return 0
end
if tonumber(redis.call('HGET', KEYS[1], player) or '0') > 0 then
  redis.call('HINCRBY', KEYS[1], player, -1)
end
for i = 4, #KEYS do
  redis.call('ZREM', KEYS[i], ARGV[2])
end
redis.call('DEL', KEYS[3])
redis.call('SET', KEYS[2], 'void', 'KEEPTTL')
return 2
