-- Record that replicas hold a game up to a version, unless a later one
-- is recorded already, then publish a notification. Reads show no event
-- past the recorded version.
-- KEYS[1] state hash
-- ARGV[1] confirmed version, ARGV[2] channel, ARGV[3] notification
if redis.call('EXISTS', KEYS[1]) == 1 then
  local c = tonumber(redis.call('HGET', KEYS[1], 'c') or '0')
  if tonumber(ARGV[1]) > c then
    redis.call('HSET', KEYS[1], 'c', ARGV[1])
  end
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
