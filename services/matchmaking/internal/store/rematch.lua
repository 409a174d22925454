-- Change the rematch of a finished game. KEYS[1] the rematch hash.
-- ARGV[1] op, then per op:
--   offer    2 player, 3 now ms, 4 window ms, 5 keep ms
--            -> {"offered", by, expires ms, offer number} | {"go"} (the opponent had
--               offered: this accepts) | {"go"} when already accepted
--   accept   2 player, 3 now ms, 4 keep ms -> {"go"} | {"none"}
--   decline  2 player, 3 now ms, 4 and 5 the offer (its expiry ms and
--            number) -> {"declined", by, decliner, expiry ms, number}
--            (that offer ends, or had ended so) | {"accepted"} |
--            {"none"} (that offer is not pending: it expired, or another
--            replaced it)
-- Each offer is numbered (field n): two made in one millisecond have one
-- expiry.
-- An offer lives a while past its window (a late answer learns it
-- expired); a rematch accepted lives keep ms, as the game records do.
--   complete 2 new game, then per player: id, side, token, expiry (x2)
-- "go" tells the caller to create (or, on a retry, re-create) the game;
-- "accat" records when a claim began, so that a watcher can complete
-- one whose caller died before the game was made.
local op = ARGV[1]
local offerGraceMs = 3600000
local f = redis.call('HMGET', KEYS[1], 'state', 'by', 'exp', 'n')
local state, by, exp, n = f[1], f[2], tonumber(f[3] or '0'), f[4] or '0'
if op == 'offer' or op == 'accept' then
  local player, now = ARGV[2], tonumber(ARGV[3])
  if state == 'accepting' or state == 'accepted' then
    return {'go'}
  end
  local pending = state == 'offered' and exp > now
  if pending and by ~= player then
    redis.call('HSET', KEYS[1], 'state', 'accepting', 'acceptor', player, 'accat', ARGV[3])
    redis.call('PEXPIRE', KEYS[1], op == 'offer' and ARGV[5] or ARGV[4])
    return {'go'}
  end
  if op == 'accept' then
    return {'none'}
  end
  if pending then
    return {'offered', by, tostring(exp), n}
  end
  local until_ = now + tonumber(ARGV[4])
  redis.call('HDEL', KEYS[1], 'decl')
  local next = redis.call('HINCRBY', KEYS[1], 'n', 1)
  redis.call('HSET', KEYS[1], 'state', 'offered', 'by', player, 'exp', until_)
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]) + offerGraceMs)
  return {'offered', player, tostring(until_), tostring(next)}
elseif op == 'decline' then
  if state == 'accepting' or state == 'accepted' then
    return {'accepted'}
  end
  -- An offer is known by its expiry and number: a retry ends no later
  -- offer.
  if exp ~= tonumber(ARGV[4]) or n ~= ARGV[5] then
    return {'none'}
  end
  if state == 'declined' then
    return {'declined', by, redis.call('HGET', KEYS[1], 'decl') or '', f[3], n}
  end
  if state ~= 'offered' or exp <= tonumber(ARGV[3]) then
    return {'none'}
  end
  -- The key keeps its lifetime: the offer's window and its grace.
  redis.call('HSET', KEYS[1], 'state', 'declined', 'decl', ARGV[2])
  return {'declined', by, ARGV[2], f[3], n}
elseif op == 'complete' then
  redis.call('HSET', KEYS[1], 'state', 'accepted', 'game', ARGV[2],
    's:' .. ARGV[3], ARGV[4], 'k:' .. ARGV[3], ARGV[5], 'x:' .. ARGV[3], ARGV[6],
    's:' .. ARGV[7], ARGV[8], 'k:' .. ARGV[7], ARGV[9], 'x:' .. ARGV[7], ARGV[10])
  return {'ok'}
end
return redis.error_reply('unknown op ' .. op)
