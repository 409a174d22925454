-- Count a listing of a seat by a process, before the seat is added to its
-- list: a release that reads the list with the count (unlist.lua) either
-- finds the count moved, or the seat added after it took its seats off.
-- KEYS[1] the process's count of listings (the slot of its list)
-- ARGV[1] how long the count is kept after the last listing, in ms
-- The count only grows, even across its deletion or expiry: it is set to
-- at least Redis' time in microseconds. It expires, since a release by a
-- build that knows nothing of it (a rolling upgrade) leaves it behind; a
-- count gone reads as none, which no count a release read equals.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = tonumber(redis.call('GET', KEYS[1]) or '0') + 1
if n < now then
  n = now
end
redis.call('SET', KEYS[1], string.format('%d', n), 'PX', ARGV[1])
return 1
