-- Record the game of a match on both tickets, once.
-- KEYS[1] creating zset, KEYS[2] match, KEYS[3] ticket a, KEYS[4] ticket b,
-- KEYS[5] players hash (as enter.lua)
-- ARGV: 1 match id, 2 game id, 3 side a, 4 token a, 5 token expiry a,
--       6 side b, 7 token b, 8 token expiry b, 9 now ms, 10 keep seconds,
--       11 notification channel; empty: the caller tells the watchers and
--       takes the match out of creating once replicas confirm the change,
--       so that a match whose confirmation failed is taken over as stalled
-- Returns 1 when this call finished the match, 0 when it already was, -1
-- when the match was given up (void.lua) or is gone (expired): its tickets
-- are not touched, and no record of it is written again, which would be
-- kept for ever.
-- The tickets' watchers are told to look again from inside the script, so
-- the notice can never overtake the change.
-- A match given up stays in creating as void.lua leaves it: until the game
-- made for it is undone.
if redis.call('EXISTS', KEYS[2]) == 0 or redis.call('HEXISTS', KEYS[2], 'void') == 1 then
  return -1
end
if ARGV[11] ~= '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
end
if redis.call('HGET', KEYS[3], 'state') == 'matched' and redis.call('HGET', KEYS[4], 'state') == 'matched' then
  return 0
end
local a = redis.call('HMGET', KEYS[3], 'player', 'name')
local b = redis.call('HMGET', KEYS[4], 'player', 'name')
for _, t in ipairs({{KEYS[3], a[1]}, {KEYS[4], b[1]}}) do
  if t[2] and redis.call('HGET', KEYS[5], t[2]) == string.match(t[1], ':t:(.*)$') then
    redis.call('HDEL', KEYS[5], t[2])
  end
end
redis.call('HSET', KEYS[3], 'state', 'matched', 'game', ARGV[2], 'side', ARGV[3], 'token', ARGV[4],
  'tokexp', ARGV[5], 'opp', b[1] or '', 'opp_name', b[2] or '', 'matched_at', ARGV[9])
redis.call('HSET', KEYS[4], 'state', 'matched', 'game', ARGV[2], 'side', ARGV[6], 'token', ARGV[7],
  'tokexp', ARGV[8], 'opp', a[1] or '', 'opp_name', a[2] or '', 'matched_at', ARGV[9])
redis.call('EXPIRE', KEYS[3], ARGV[10])
redis.call('EXPIRE', KEYS[4], ARGV[10])
redis.call('HSET', KEYS[2], 'game', ARGV[2])
if ARGV[11] ~= '' then
  redis.call('PUBLISH', ARGV[11], string.match(KEYS[3], ':t:(.*)$') .. ',' .. string.match(KEYS[4], ':t:(.*)$'))
end
return 1
