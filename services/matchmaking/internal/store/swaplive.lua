-- Compare and set a player's live-ticket record, kept beside the pools so
-- that a player waits in one pool at a time (see Store.Enter).
-- KEYS[1] the record: "<ticket id>|<claimed ms>"
-- ARGV: 1 the record expected now ("" for none), 2 the new record ("" to
--       delete it), 3 the new record's lifetime in seconds
-- Returns 1 when set, 0 when the record was not the one expected.
local cur = redis.call('GET', KEYS[1]) or ''
if cur ~= ARGV[1] then
  return 0
end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
end
return 1
