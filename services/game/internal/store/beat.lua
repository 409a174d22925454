-- Beat of a game process: the epoch of the service's data in Redis.
-- KEYS[1] beat key
-- ARGV[1] a new epoch, unique to this call, written if the key is missing
-- ARGV[2] expiry in milliseconds
-- Returns the epoch the key holds now. A process that finds another epoch
-- than its last beat's knows that Redis lost its data in between, whichever
-- process wrote the new one.
local e = redis.call('GET', KEYS[1])
if e then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return e
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return ARGV[1]
