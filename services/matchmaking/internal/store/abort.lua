-- Count one aborted rated game against the player who aborted it (or let
-- it abort without a first move), exactly once: the game's "done" marker
-- shares the kind's hash tag with the counts, as for a rating. The
-- player's aborts of the last window are logged too, for the bound on
-- entering a rated queue (AbortWait).
-- KEYS: 1 aborts hash, 2 done marker of the game, 3 the player's log of
--       recent aborts (zset: game id -> when the game ended, ms), 4 who
--       the game was counted against (for unrate.lua, which takes the
--       count back from a game nobody was told of)
-- ARGV: 1 player id, 2 seconds to keep the done marker, 3 game id, 4 when
--       the game ended (ms), 5 the window (ms), 6 now (ms), 7 who counts
--       it (a rating consumer's id, "": none)
-- Returns 1 when counted (also to the same counter again, whose first call
-- counted it but lost its reply), 0 when already counted.
local done = redis.call('GET', KEYS[2])
if done then
  if ARGV[7] ~= '' and done == ARGV[7] then
    return 1
  end
  return 0
end
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('SET', KEYS[2], ARGV[7], 'EX', ARGV[2])
redis.call('SET', KEYS[4], ARGV[1], 'EX', ARGV[2])
local at, window, now = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - window)
if at > now - window then
  -- An abort settled late counts only for what is left of its window.
  redis.call('ZADD', KEYS[3], at, ARGV[3])
  redis.call('PEXPIRE', KEYS[3], window)
end
return 1
