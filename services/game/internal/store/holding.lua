-- Count a listing of a seat by a process, before the seat is added to its
-- list: a release that reads the list with the count (unlist.lua) either
-- finds the count moved, or the seat added after it took its seats off.
-- KEYS[1] the process's count of listings (the slot of its list)
-- The count only grows, even across its deletion: it is set to at least
-- Redis' time in microseconds.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = tonumber(redis.call('GET', KEYS[1]) or '0') + 1
if n < now then
  n = now
end
redis.call('SET', KEYS[1], string.format('%d', n))
return 1
