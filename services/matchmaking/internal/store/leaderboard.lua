-- Read one page of a kind's leaderboard as one moment of it: the ranks,
-- ratings, names, games and aborts of a page all agree, whatever is rated
-- meanwhile. Every key is the kind's ({r:<kind>}), one slot.
-- KEYS: 1 leaderboard (ZSET of ratings), 2 names, 3 games, 4 aborts
-- ARGV: 1 start, 2 stop (0-based places, inclusive); 3 a player to centre
--       the page on ("" for none), 4 the places each side of that player
-- Returns {-1} when the player to centre on is not on the board, else
-- {players on the board, the page's start, players rated above its first,
--  then for each player: id, rating, name, games, aborts}.
local start, stop = tonumber(ARGV[1]), tonumber(ARGV[2])
if ARGV[3] ~= '' then
  local place = redis.call('ZREVRANK', KEYS[1], ARGV[3])
  if not place then
    return {-1}
  end
  local reach = tonumber(ARGV[4])
  start, stop = math.max(place - reach, 0), place + reach
end
local out = {redis.call('ZCARD', KEYS[1]), start, 0}
local page = redis.call('ZREVRANGE', KEYS[1], start, stop, 'WITHSCORES')
if #page == 0 then
  return out
end
-- Equal ratings share a rank: the first of a page may share its rank with
-- players on the page before.
out[3] = redis.call('ZCOUNT', KEYS[1], '(' .. page[2], '+inf')
local ids = {}
for i = 1, #page, 2 do
  ids[#ids + 1] = page[i]
end
local names = redis.call('HMGET', KEYS[2], unpack(ids))
local games = redis.call('HMGET', KEYS[3], unpack(ids))
local aborts = redis.call('HMGET', KEYS[4], unpack(ids))
for i, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = page[2 * i]
  out[#out + 1] = names[i]
  out[#out + 1] = games[i]
  out[#out + 1] = aborts[i]
end
return out
