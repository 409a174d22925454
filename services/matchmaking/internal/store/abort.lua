-- Count one aborted rated game against the player who aborted it (or let
-- it abort without a first move), exactly once: the game's "done" marker
-- shares the kind's hash tag with the counts, as for a rating.
-- KEYS: 1 aborts hash, 2 done marker of the game
-- ARGV: 1 player id, 2 seconds to keep the done marker
-- Returns 1 when counted, 0 when already counted.
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('SET', KEYS[2], '1', 'EX', ARGV[2])
return 1
