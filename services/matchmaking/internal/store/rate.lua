-- Apply the Elo result of one rated game to both players, exactly once:
-- every key of a game kind's ratings shares one hash tag, and the game's
-- "done" marker lives there too, so a second delivery of the same ending
-- finds the marker and changes nothing.
-- KEYS: 1 ratings hash, 2 games hash, 3 leaderboard zset, 4 names hash,
--       5 done marker of the game, 6 history of a, 7 history of b, 8 hash
--       of when each shown name was given (ms; rename.lua)
-- ARGV: 1 game id, 2 a id, 3 a name, 4 b id, 5 b name, 6 a's score (1, 0.5
--       or 0), 7 now ms, 8 start rating, 9 K of provisional players,
--       10 K after, 11 games a player is provisional for, 12 history
--       length, 13 seconds to keep the done marker, 14 when a was given
--       a's name (ms, "": unknown), 15 the same of b, 16 who applies it
--       (a rating consumer's id, "": none)
-- Returns {0} when already applied, else {1, a before, a after, b before,
-- b after}: also to the same applier again, whose first call applied the
-- game but lost its reply, so that it is counted and logged as applied.
local done = redis.call('GET', KEYS[5])
if done then
  local by, ab, aa, bb, ba = string.match(done, '^(.*)|(%-?%d+)|(%-?%d+)|(%-?%d+)|(%-?%d+)$')
  if by and by ~= '' and by == ARGV[16] then
    return {1, tonumber(ab), tonumber(aa), tonumber(bb), tonumber(ba)}
  end
  return {0}
end
local start = tonumber(ARGV[8])
local ra = tonumber(redis.call('HGET', KEYS[1], ARGV[2]) or start)
local rb = tonumber(redis.call('HGET', KEYS[1], ARGV[4]) or start)
local ga = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
local gb = tonumber(redis.call('HGET', KEYS[2], ARGV[4]) or '0')
local sa = tonumber(ARGV[6])
local khigh, klow, prov = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])

local function round(x)
  if x >= 0 then
    return math.floor(x + 0.5)
  end
  return -math.floor(-x + 0.5)
end

local ea = 1 / (1 + 10 ^ ((rb - ra) / 400))
local ka, kb = klow, klow
if ga < prov then ka = khigh end
if gb < prov then kb = khigh end
local na = ra + round(ka * (sa - ea))
local nb = rb + round(kb * ((1 - sa) - (1 - ea)))

redis.call('HSET', KEYS[1], ARGV[2], na, ARGV[4], nb)
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
redis.call('HINCRBY', KEYS[2], ARGV[4], 1)
redis.call('ZADD', KEYS[3], na, ARGV[2], nb, ARGV[4])
-- The names the game was made with, for players without one, and for
-- players whose shown name was given before the game's: a player who
-- signed in with a new name during the game has it shown already
-- (rename.lua), and the game's would put the old one back. A game whose
-- name's time is unknown (a record of an older release) changes no name
-- shown.
local function name(id, n, at)
  at = tonumber(at)
  if redis.call('HEXISTS', KEYS[4], id) == 1 and (not at or at <= tonumber(redis.call('HGET', KEYS[8], id) or '0')) then
    return
  end
  redis.call('HSET', KEYS[4], id, n)
  if at then
    redis.call('HSET', KEYS[8], id, at)
  end
end
name(ARGV[2], ARGV[3], ARGV[14])
name(ARGV[4], ARGV[5], ARGV[15])
local now = tonumber(ARGV[7])
redis.call('LPUSH', KEYS[6], cjson.encode({g = ARGV[1], s = sa, b = ra, a = na, o = ARGV[4], on = ARGV[5], ob = rb, t = now}))
redis.call('LPUSH', KEYS[7], cjson.encode({g = ARGV[1], s = 1 - sa, b = rb, a = nb, o = ARGV[2], on = ARGV[3], ob = ra, t = now}))
redis.call('LTRIM', KEYS[6], 0, tonumber(ARGV[12]) - 1)
redis.call('LTRIM', KEYS[7], 0, tonumber(ARGV[12]) - 1)
redis.call('SET', KEYS[5], ARGV[16] .. '|' .. ra .. '|' .. na .. '|' .. rb .. '|' .. nb, 'EX', ARGV[13])
return {1, ra, na, rb, nb}
