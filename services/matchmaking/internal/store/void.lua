-- Give up a match whose game could not be made in time: both tickets end
-- expired, their players may enter again, and a late creation of the game
-- finds the match void (markmade.lua, finish.lua) and records nothing.
-- KEYS[1] creating zset, KEYS[2] match, KEYS[3] ticket a, KEYS[4] ticket b,
-- KEYS[5] players hash (as enter.lua)
-- ARGV: 1 match id, 2 now ms, 3 notification channel ("": the caller tells
--       the watchers and takes the match out of creating once replicas
--       confirm the change, so that one whose confirmation failed is given
--       up again), 4 keep seconds: an expired ticket is kept at least so
--       long, as finish.lua keeps a matched one
-- Returns {1, made, since} when the match is given up (by this call or an
-- earlier one), made being the game noted as made for it (markmade.lua)
-- or "", since the ms of the first give-up; {0, "", 0} when its game was
-- recorded on the tickets. A match with a made game stays in creating:
-- its callers undo the game at every look and take the match out only
-- once no creation that noted the game before the first give-up can
-- still list it, so the first give-up's time is kept.
if redis.call('HGET', KEYS[2], 'game') then
  return {0, '', 0}
end
local made = redis.call('HGET', KEYS[2], 'made') or ''
if ARGV[3] ~= '' and made == '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
end
local since = redis.call('HGET', KEYS[2], 'void')
if since then
  return {1, made, tonumber(since)}
end
-- A match gone (expired) is not written again, which would keep it for
-- ever; its tickets, if still paired with it, end all the same.
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HSET', KEYS[2], 'void', ARGV[2])
end
local ids = {}
for _, k in ipairs({KEYS[3], KEYS[4]}) do
  local f = redis.call('HMGET', k, 'state', 'match', 'player')
  local id = string.match(k, ':t:(.*)$')
  if f[1] == 'paired' and f[2] == ARGV[1] then
    redis.call('HSET', k, 'state', 'expired', 'gave_up', ARGV[2])
    if redis.call('TTL', k) < tonumber(ARGV[4]) then
      redis.call('EXPIRE', k, ARGV[4])
    end
    if redis.call('HGET', KEYS[5], f[3]) == id then
      redis.call('HDEL', KEYS[5], f[3])
    end
  end
  ids[#ids + 1] = id
end
if ARGV[3] ~= '' then
  redis.call('PUBLISH', ARGV[3], ids[1] .. ',' .. ids[2])
end
return {1, made, tonumber(ARGV[2])}
