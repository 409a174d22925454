-- Let an entering ticket (enter.lua) wait for pairing, its entry having
-- made sure that the player waits in no other pool. KEYS as enter.lua: 1
-- queue, 2 meta, 3 players, 4 ticket, 5 its request.
-- ARGV: 1 ticket id, 2 the latest it may be let wait, in the pool's own
--       ms (Redis' time): later, entries to other pools may have taken its
--       entry for a failed one
-- Returns "ok" (waiting now, or already), or the state it was found in
-- ("cancelled", "expired", ... or "" if gone), or "late": then it is
-- expired, never having waited, and its request forgotten, so that a retry
-- of it enters afresh.
local f = redis.call('HMGET', KEYS[4], 'state', 'rating', 'enq', 'exp', 'player')
if f[1] == 'waiting' or f[1] == 'paired' or f[1] == 'matched' then
  return 'ok'
end
if f[1] ~= 'entering' then
  return f[1] or ''
end
local t = redis.call('TIME')
if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[4], 'state', 'expired')
  if redis.call('HGET', KEYS[3], f[5]) == ARGV[1] then
    redis.call('HDEL', KEYS[3], f[5])
  end
  if redis.call('GET', KEYS[5]) == ARGV[1] then
    redis.call('DEL', KEYS[5])
  end
  return 'late'
end
redis.call('HSET', KEYS[4], 'state', 'waiting')
redis.call('ZADD', KEYS[1], f[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], f[3] .. ':' .. f[4] .. ':' .. f[5])
return 'ok'
