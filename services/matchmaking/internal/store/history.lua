-- Read a page of one player's rating history, latest first. Each change
-- is numbered by the player's rated games of the kind when it was applied
-- (rate.lua counts the game and pushes its change together), so the change
-- at index i of the list is number games - i: a page that follows another
-- starts below that page's last number, however many changes were pushed
-- since.
-- KEYS: 1 games hash, 2 history list
-- ARGV: 1 player id, 2 the number below which to start (0: the latest),
--       3 page length
-- Returns {-1} when the number is beyond the player's games, else
-- {number of the first change on the page, 1 when older changes are kept
-- past the page (else 0), changes...}.
local games = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local below, limit = tonumber(ARGV[2]), tonumber(ARGV[3])
local start = 0
if below > 0 then
  if below > games then
    return {-1}
  end
  start = games - below + 1
end
local page = redis.call('LRANGE', KEYS[2], start, start + limit - 1)
local more = 0
if #page == limit and redis.call('LLEN', KEYS[2]) > start + limit then
  more = 1
end
local out = {games - start, more}
for _, c in ipairs(page) do
  out[#out + 1] = c
end
return out
