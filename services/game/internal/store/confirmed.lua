-- Record that replicas hold a game up to a version, unless a later one
-- is recorded already, then publish a notification. Reads show no event
-- past the recorded version. A commit that began a turn at its judgment
-- (field b, "judged:version", commit.lua) is seen from now on: the turn is
-- excused what it was held until now (field x, as commit.lua writes it),
-- when that is at least the least hold excused.
-- KEYS[1] state hash
-- ARGV[1] confirmed version, ARGV[2] channel, ARGV[3] notification,
-- ARGV[4] the least hold excused (ms)
-- Returns the hold this confirmation wrote ("" when none).
local hold = ''
if redis.call('EXISTS', KEYS[1]) == 1 then
  local c = tonumber(redis.call('HGET', KEYS[1], 'c') or '0')
  local v = tonumber(ARGV[1])
  if v > c then
    redis.call('HSET', KEYS[1], 'c', ARGV[1])
    local judged, began = string.match(redis.call('HGET', KEYS[1], 'b') or '', '^(%d+):(%d+)$')
    if judged and tonumber(began) > c and tonumber(began) <= v then
      local t = redis.call('TIME')
      local held = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(judged)
      if held >= tonumber(ARGV[4]) then
        hold = judged .. ':' .. held
        redis.call('HSET', KEYS[1], 'x', hold)
      end
    end
  end
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return hold
