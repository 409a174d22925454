-- Rewrite a game's version unchanged, so that a WAIT on the same
-- connection covers every earlier write of the game (a remembered answer
-- read, for a retry, from a commit that was never confirmed), and return
-- it (0: no such game).
-- KEYS[1] state hash
local v = redis.call('HGET', KEYS[1], 'v')
if not v then
  return 0
end
redis.call('HSET', KEYS[1], 'v', v)
return tonumber(v)
