-- Commit one command of one game, all or nothing.
-- KEYS[1] state hash, KEYS[2] event stream, KEYS[3] request hash
-- ARGV[1] expected version ("0": the game must not exist)
-- ARGV[2] new version, ARGV[3] state
-- ARGV[4] request id ("" for none), ARGV[5] response to remember
-- ARGV[6] ttl in seconds, ARGV[7] channel, ARGV[8] notification
-- ARGV[9..] events, numbered from expected+1
if ARGV[4] ~= '' then
  local prev = redis.call('HGET', KEYS[3], ARGV[4])
  if prev then
    return {'dup', prev}
  end
end
local cur = redis.call('HGET', KEYS[1], 'v') or '0'
if cur ~= ARGV[1] then
  return {'conflict', cur}
end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 's', ARGV[3])
local v = tonumber(ARGV[1])
for i = 9, #ARGV do
  v = v + 1
  redis.call('XADD', KEYS[2], v .. '-1', 'e', ARGV[i])
end
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[4], ARGV[5])
end
local ttl = tonumber(ARGV[6])
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
  redis.call('EXPIRE', KEYS[3], ttl)
end
redis.call('PUBLISH', ARGV[7], ARGV[8])
return {'ok'}
