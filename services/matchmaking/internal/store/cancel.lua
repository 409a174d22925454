-- Cancel a waiting (or entering) ticket. KEYS as enter.lua: 1 queue, 2
-- meta, 3 players, 4 ticket. ARGV: 1 the caller's player id, 2 how long
-- after its claim an entering ticket may still be let wait (ms): later, its
-- entry failed, and it ends expired, as it reads, not cancelled.
-- Returns "nf" (no such ticket), "perm" (another player's), "ok" (now or
-- already cancelled or expired) or "late" (already paired).
if redis.call('EXISTS', KEYS[4]) == 0 then
  return 'nf'
end
local f = redis.call('HMGET', KEYS[4], 'player', 'state', 'claimed')
if f[1] ~= ARGV[1] then
  return 'perm'
end
if f[2] == 'waiting' or f[2] == 'entering' then
  local id = string.match(KEYS[4], ':t:(.*)$')
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  if redis.call('HGET', KEYS[3], ARGV[1]) == id then
    redis.call('HDEL', KEYS[3], ARGV[1])
  end
  local ended = 'cancelled'
  if f[2] == 'entering' then
    local t = redis.call('TIME')
    if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > tonumber(f[3] or '0') + tonumber(ARGV[2]) then
      ended = 'expired'
    end
  end
  redis.call('HSET', KEYS[4], 'state', ended)
  return 'ok'
end
if f[2] == 'cancelled' or f[2] == 'expired' then
  return 'ok'
end
return 'late'
