-- Record that a game of a player's began outside the queue, for entries
-- of theirs on their way to read (see Store.GameBegan).
-- KEYS[1] the record: the latest such game's start, in ms
-- ARGV: 1 the game's start in ms, 2 the record's lifetime in ms
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
