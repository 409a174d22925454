-- Record that process ARGV[3] stopped cleanly at ARGV[1] (ms), unless one
-- stopped later, for ARGV[2] ms: the start of a silence, should it have
-- been the last. KEYS[1] the millisecond of the last clean stop, KEYS[2]
-- "<ms>|<process>" of it: a stop by a release before this one writes
-- KEYS[1] alone, and leaves no beat to say until when it served.
local at = tonumber(ARGV[1])
if at > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('SET', KEYS[2], ARGV[1] .. '|' .. ARGV[3], 'PX', ARGV[2])
end
return 1
