-- Record that a process stopped cleanly at ARGV[1] (ms), unless one
-- stopped later, for ARGV[2] ms: the start of a silence, should it have
-- been the last.
local at = tonumber(ARGV[1])
if at > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
