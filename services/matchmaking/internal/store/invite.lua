-- Change a friend invite. KEYS[1] the invite hash.
-- ARGV[1] op, then per op:
--   accept   2 player, 3 name, 4 now ms, 5 creator first (1 or 0)
--            -> nf | own | used | cancelled | go
--            ("go": the caller holds the invite; create or re-create its game
--            with the sides drawn when it was claimed)
--   cancel   2 player, 3 now ms -> nf | perm | late | ok
--   complete 2 game, 3 creator side, 4 creator token, 5 its expiry,
--            6 friend side, 7 friend token, 8 its expiry, 9 keep ms -> ok
-- An invite is single use: only one player ever gets "go".
local op = ARGV[1]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 'nf'
end
local f = redis.call('HMGET', KEYS[1], 'creator', 'state', 'exp', 'acceptor')
local creator, state, exp, acceptor = f[1], f[2], tonumber(f[3]), f[4]
if op == 'accept' then
  local now = tonumber(ARGV[4])
  if (state == 'accepting' or state == 'accepted') then
    if acceptor == ARGV[2] then
      return 'go'
    end
    return 'used'
  end
  if exp <= now then
    return 'nf'
  end
  if state == 'cancelled' then
    return 'cancelled'
  end
  if creator == ARGV[2] then
    return 'own'
  end
  redis.call('HSET', KEYS[1], 'state', 'accepting', 'acceptor', ARGV[2], 'aname', ARGV[3], 'accat', ARGV[4],
    'cfirst', ARGV[5])
  return 'go'
elseif op == 'cancel' then
  if creator ~= ARGV[2] then
    return 'perm'
  end
  if state == 'cancelled' then
    return 'ok'
  end
  if state ~= 'open' then
    return 'late'
  end
  if exp <= tonumber(ARGV[3]) then
    return 'nf'
  end
  redis.call('HSET', KEYS[1], 'state', 'cancelled')
  return 'ok'
elseif op == 'complete' then
  redis.call('HSET', KEYS[1], 'state', 'accepted', 'game', ARGV[2], 'csid', ARGV[3], 'ctok', ARGV[4],
    'cexp', ARGV[5], 'asid', ARGV[6], 'atok', ARGV[7], 'aexp', ARGV[8])
  -- The creator must still be able to read the outcome after the link expires.
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[9]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[9])
  end
  return 'ok'
end
return redis.error_reply('unknown op ' .. op)
