-- Take the seats a release read off a process's list, unless the process
-- listed a seat since (its count of listings moved): the release cannot
-- tell a seat listed again from the one it read.
-- KEYS[1] the process's list, KEYS[2] its count of listings
-- ARGV[1] the count read with the list ("" none), ARGV[2...] the seats
-- Returns -1 if the process listed a seat since, else the seats left.
if (redis.call('GET', KEYS[2]) or '') ~= ARGV[1] then
  return -1
end
for i = 2, #ARGV do
  redis.call('SREM', KEYS[1], ARGV[i])
end
local left = redis.call('SCARD', KEYS[1])
if left == 0 then
  redis.call('DEL', KEYS[2])
end
return left
