-- Enter a ticket into its pool, entering: it waits for no pairing until
-- activate.lua, once its entry has made sure that the player waits in no
-- other pool. Every key shares the pool's hash tag.
-- KEYS[1] queue   zset: ticket id -> rating
-- KEYS[2] meta    hash: ticket id -> "entered_ms:expires_ms:player"
-- KEYS[3] players hash: player -> waiting ticket id
-- KEYS[4] ticket  hash of the new ticket
-- KEYS[5] request string: the ticket made for this player's request id
-- ARGV: 1 ticket id, 2 player, 3 name, 4 rating, 5 now ms, 6 expires ms,
--       7 keep seconds, 8 key base of the pool, 9 pool id, 10 when the
--       name was given ms ("": unknown), 11 seconds the request is
--       remembered: longer than the ticket can be kept, 12 how long an
--       entering ticket is an entry on its way (ms): older, its entry
--       failed, and it holds nothing, 13 the date of its entry's claim (ms)
-- Returns {"ok"|"dup"|"busy", ticket id}.
local prev = redis.call('GET', KEYS[5])
if prev then
  return {'dup', prev}
end
local cur = redis.call('HGET', KEYS[3], ARGV[2])
if cur then
  local ck = ARGV[8] .. 't:' .. cur
  local f = redis.call('HMGET', ck, 'state', 'claimed')
  -- One live ticket per player and pool: nobody is paired with themselves,
  -- nor, while a game is being made for a ticket, paired again into a
  -- second game of the pool.
  if f[1] == 'waiting' or f[1] == 'paired' then
    return {'busy', cur}
  end
  if f[1] == 'entering' then
    if math.abs(tonumber(ARGV[13]) - tonumber(f[2] or '0')) < tonumber(ARGV[12]) then
      return {'busy', cur}
    end
    -- Its entry failed: it never waited.
    redis.call('HSET', ck, 'state', 'expired')
  end
end
redis.call('HSET', KEYS[4], 'player', ARGV[2], 'name', ARGV[3], 'rating', ARGV[4],
  'enq', ARGV[5], 'exp', ARGV[6], 'state', 'entering', 'pool', ARGV[9], 'named', ARGV[10], 'claimed', ARGV[13])
redis.call('EXPIRE', KEYS[4], ARGV[7])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[1])
-- The players hash outlives every ticket it names (never shortened, for a
-- replica may keep tickets longer), so a pool nobody enters for that long
-- leaves none of it behind.
if redis.call('TTL', KEYS[3]) < tonumber(ARGV[7]) then
  redis.call('EXPIRE', KEYS[3], ARGV[7])
end
redis.call('SET', KEYS[5], ARGV[1], 'EX', ARGV[11])
return {'ok', ARGV[1]}
