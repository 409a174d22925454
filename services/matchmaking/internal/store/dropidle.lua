-- Forget an idle pool, unless a ticket entered since the caller looked
-- (EnterQueue touches the registry before it enters the ticket).
-- KEYS[1] pool registry zset: pool id -> last entry ms
-- ARGV[1] pool id, ARGV[2] cutoff ms. Returns 1 when dropped.
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) < tonumber(ARGV[2]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 1
end
return 0
