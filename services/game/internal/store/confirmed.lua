-- Record that replicas hold a game up to a version, unless a later one
-- is recorded already, then publish a notification. Reads show no event
-- past the recorded version. A commit that began a turn at its judgment
-- (field b, "judged:version", commit.lua) is seen from the first such
-- confirmation on: that one measures what it was held until then, and
-- records it (field x, as commit.lua writes it) when that is at least the
-- least hold excused.
-- KEYS[1] state hash
-- ARGV[1] confirmed version, ARGV[2] channel ("": publish nothing),
-- ARGV[3] notification,
-- ARGV[4] the least hold excused (ms)
-- Returns the hold recorded for the last commit up to the version that
-- began a turn, by this confirmation or an earlier one ("" when none), so
-- that every process confirming it learns it.
local hold = ''
if redis.call('EXISTS', KEYS[1]) == 1 then
  local c = tonumber(redis.call('HGET', KEYS[1], 'c') or '0')
  local v = tonumber(ARGV[1])
  if v > c then
    redis.call('HSET', KEYS[1], 'c', ARGV[1])
  end
  local judged, began = string.match(redis.call('HGET', KEYS[1], 'b') or '', '^(%d+):(%d+)$')
  if judged and tonumber(began) <= v then
    if tonumber(began) > c then
      local t = redis.call('TIME')
      local held = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(judged)
      if held >= tonumber(ARGV[4]) then
        hold = judged .. ':' .. held
        redis.call('HSET', KEYS[1], 'x', hold)
      end
    else
      local x = redis.call('HGET', KEYS[1], 'x') or ''
      if string.match(x, '^(%d+):') == judged then
        hold = x
      end
    end
  end
end
if ARGV[2] ~= '' then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return hold
