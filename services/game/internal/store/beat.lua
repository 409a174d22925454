-- A game process's beat, about once a second: KEYS[1] exists while any
-- process beats (ARGV[1]: how long it outlives the last beat, in ms).
-- Returns 1 if it did not exist: this is the service's first beat, or
-- Redis lost its data.
local had = redis.call('EXISTS', KEYS[1])
redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
return 1 - had
