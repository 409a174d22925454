-- Enter a ticket into its pool. Every key shares the pool's hash tag.
-- KEYS[1] queue   zset: ticket id -> rating
-- KEYS[2] meta    hash: ticket id -> "entered_ms:expires_ms:player"
-- KEYS[3] players hash: player -> waiting ticket id
-- KEYS[4] ticket  hash of the new ticket
-- KEYS[5] request string: the ticket made for this player's request id
-- ARGV: 1 ticket id, 2 player, 3 name, 4 rating, 5 now ms, 6 expires ms,
--       7 keep seconds, 8 key base of the pool, 9 pool id, 10 when the
--       name was given ms ("": unknown), 11 seconds the request is
--       remembered: longer than the ticket can be kept
-- Returns {"ok"|"dup"|"busy", ticket id}.
local prev = redis.call('GET', KEYS[5])
if prev then
  return {'dup', prev}
end
local cur = redis.call('HGET', KEYS[3], ARGV[2])
if cur then
  local st = redis.call('HGET', ARGV[8] .. 't:' .. cur, 'state')
  -- One live ticket per player and pool: nobody is paired with themselves,
  -- nor, while a game is being made for a ticket, paired again into a
  -- second game of the pool.
  if st == 'waiting' or st == 'paired' then
    return {'busy', cur}
  end
end
redis.call('HSET', KEYS[4], 'player', ARGV[2], 'name', ARGV[3], 'rating', ARGV[4],
  'enq', ARGV[5], 'exp', ARGV[6], 'state', 'waiting', 'pool', ARGV[9], 'named', ARGV[10])
redis.call('EXPIRE', KEYS[4], ARGV[7])
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[5] .. ':' .. ARGV[6] .. ':' .. ARGV[2])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[1])
redis.call('SET', KEYS[5], ARGV[1], 'EX', ARGV[11])
return {'ok', ARGV[1]}
