-- One pairing pass over one pool, atomic: expire old tickets, then pair
-- neighbours in rating order whose difference is within the window of
-- either ticket (the window widens with the wait), in rounds until no
-- compatible neighbours are left (a few at most; see the end): a ticket
-- past half its life first, oldest first, then closest pairs first, as
-- many as can be made among pairs as close, the ticket left out the last
-- to enter of those that can pair with a neighbour the round leaves free,
-- or else of all (tickets of equal ratings in the order they entered).
-- Closest first alone would leave a player at an end of the rating range
-- waiting until their ticket expires, whenever the others come in pairs.
-- A paired ticket leaves the queue in the same step, so no ticket is ever
-- paired twice, however many matchmakers run this concurrently.
-- KEYS[1] queue, KEYS[2] meta, KEYS[3] players (as enter.lua),
-- KEYS[4] creating zset: match id -> time its game creation started
-- KEYS[5] match sequence
-- ARGV: 1 key base, 2 now ms, 3 base window, 4 widening per second,
--       5 max window (0: none), 6 max pairs, 7 pool tag, 8 keep seconds
-- Returns {{match id, ticket a, ticket b, a's player, name, entered ms,
-- named ms, b's player, name, entered ms, named ms, ...}, {expired ticket
-- ids}}: enough to create the game without reading the tickets again.
local base = ARGV[1]
local now = tonumber(ARGV[2])
local bw, widen, maxw = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local maxPairs = tonumber(ARGV[6])

-- While the pool's slot moves to another master (redis-cli --cluster
-- reshard), the keys named here rather than in KEYS (tickets, matches) may
-- be on either master: the old one refuses a key it lacks (ASK), which
-- would stop the pass midway, tickets paired with no match made; the new
-- one would take a ticket not moved yet for gone. Two keys that never
-- exist, read together, tell either before anything is written, and the
-- pass is left to a later one.
local moving = redis.pcall('EXISTS', base .. 'moving:1', base .. 'moving:2')
if type(moving) == 'table' and moving.err then
  return redis.error_reply('TRYAGAIN the pool is moving to another Redis master')
end

-- A player's field naming a ticket whose record is gone holds nothing,
-- but only that player's next entry would overwrite it: an entry that
-- died before activate.lua, or a match dropped after a long outage, left
-- it in a busy pool for ever. A few fields are looked at each pass.
local sample = redis.call('HRANDFIELD', KEYS[3], 8, 'WITHVALUES')
for i = 1, #sample, 2 do
  if redis.call('EXISTS', base .. 't:' .. sample[i + 1]) == 0 then
    redis.call('HDEL', KEYS[3], sample[i])
  end
end

local items = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local n = #items / 2
if n == 0 then
  return {{}, {}}
end
local ids, ratings = {}, {}
for i = 1, n do
  ids[i] = items[2 * i - 1]
  ratings[i] = tonumber(items[2 * i])
end
local meta = {}
for s = 1, n, 1000 do
  local e = math.min(s + 999, n)
  local part = redis.call('HMGET', KEYS[2], unpack(ids, s, e))
  for j = 1, e - s + 1 do
    meta[s + j - 1] = part[j]
  end
end

local live, expired = {}, {}
for i = 1, n do
  local enq, exp, player
  if meta[i] then
    enq, exp, player = string.match(meta[i], '^(%d+):(%d+):(.*)$')
  end
  local rec = base .. 't:' .. ids[i]
  local kept = enq and redis.call('EXISTS', rec) == 1
  if not enq then
    -- Unreadable: leave the queue rather than risk a wrong pairing.
    redis.call('ZREM', KEYS[1], ids[i])
    redis.call('HDEL', KEYS[2], ids[i])
  elseif tonumber(exp) <= now or not kept then
    -- Expired, or its record outlived (a matchmaking outage longer than
    -- the record's life): nobody could be told of a match.
    redis.call('ZREM', KEYS[1], ids[i])
    redis.call('HDEL', KEYS[2], ids[i])
    if redis.call('HGET', KEYS[3], player) == ids[i] then
      redis.call('HDEL', KEYS[3], player)
    end
    -- HSET on a record that expired would make it again, for ever.
    if kept then
      redis.call('HSET', rec, 'state', 'expired')
    end
    expired[#expired + 1] = ids[i]
  else
    live[#live + 1] = {id = ids[i], r = ratings[i], enq = tonumber(enq), exp = tonumber(exp), player = player}
  end
end

-- Equal ratings (every guest without an estimate has one) in the order
-- they entered, not by their random ids, so that whoever waits longest
-- is the neighbour of a newcomer and wins a tie. The queue is in rating
-- order already: only runs of equal ratings are sorted.
local function entered(x, y)
  if x.enq ~= y.enq then
    return x.enq < y.enq
  end
  return x.id < y.id
end
local runStart = 1
for i = 2, #live + 1 do
  if i > #live or live[i].r ~= live[runStart].r then
    if i - runStart > 1 then
      local run = {}
      for j = runStart, i - 1 do
        run[#run + 1] = live[j]
      end
      table.sort(run, entered)
      for j = 1, #run do
        live[runStart + j - 1] = run[j]
      end
    end
    runStart = i
  end
end

local function window(t)
  -- A ticket entered by a replica whose clock is ahead has waited no
  -- less than nothing.
  local w = bw + widen * math.max(0, now - t.enq) / 1000
  if maxw > 0 and w > maxw then
    w = maxw
  end
  return w
end

-- late is when a ticket past half its life entered, for the oldest to
-- be served first; math.huge for the others.
local function late(t)
  if 2 * (now - t.enq) >= t.exp - t.enq then
    return t.enq
  end
  return math.huge
end

-- Rounds: pair compatible neighbours, closest first; then look again at
-- who is left, whose new neighbours may be compatible (in a, b, c, d with
-- b-c closest, a and d become neighbours once b and c are paired).
local out, made = {}, 0

-- pairAt pairs live[i] and live[i + 1].
local function pairAt(i)
  local a, b = live[i], live[i + 1]
  local mid = ARGV[7] .. '-' .. redis.call('INCR', KEYS[5])
  redis.call('ZREM', KEYS[1], a.id, b.id)
  redis.call('HDEL', KEYS[2], a.id, b.id)
  for _, t in ipairs({a, b}) do
    -- The player stays listed with the ticket until its game is made
    -- or given up (finish.lua, void.lua): enter.lua refuses a second
    -- ticket meanwhile.
    redis.call('HSET', base .. 't:' .. t.id, 'state', 'paired', 'match', mid, 'paired_at', ARGV[2])
  end
  local mk = base .. 'm:' .. mid
  redis.call('HSET', mk, 'a', a.id, 'b', b.id, 'at', ARGV[2])
  -- The match outlives its tickets, so that one found stalled after a
  -- long outage is given up, its tickets ended: a paired ticket
  -- outliving its match would keep its player out of every pool.
  local keep = math.max(tonumber(ARGV[8]), redis.call('TTL', base .. 't:' .. a.id), redis.call('TTL', base .. 't:' .. b.id))
  redis.call('EXPIRE', mk, keep)
  -- The sequence outlives every match it numbered, so a pool used
  -- again after it expired cannot reuse a live match's id.
  if redis.call('TTL', KEYS[5]) < 2 * keep then
    redis.call('EXPIRE', KEYS[5], 2 * keep)
  end
  redis.call('ZADD', KEYS[4], now, mid)
  out[#out + 1] = mid
  out[#out + 1] = a.id
  out[#out + 1] = b.id
  for _, t in ipairs({a, b}) do
    out[#out + 1] = t.player
    local f = redis.call('HMGET', base .. 't:' .. t.id, 'name', 'named')
    out[#out + 1] = f[1] or ''
    out[#out + 1] = tostring(t.enq)
    out[#out + 1] = f[2] or ''
  end
end

-- canPair reports whether two tickets (b may be missing) could pair:
-- two players, within the window of either.
local function canPair(a, b)
  return b ~= nil and a.player ~= b.player and math.abs(b.r - a.r) <= math.max(window(a), window(b))
end

local function pairOnce()
  local cands = {}
  for i = 1, #live - 1 do
    local a, b = live[i], live[i + 1]
    if canPair(a, b) then
      cands[#cands + 1] = {i = i, d = b.r - a.r, late = math.min(late(a), late(b))}
    end
  end
  table.sort(cands, function(x, y)
    if x.late ~= y.late then
      return x.late < y.late
    end
    if x.d ~= y.d then
      return x.d < y.d
    end
    return x.i < y.i
  end)
  local used, chains, before = {}, {}, made
  -- leaveOut is the ticket of an odd chain first..last to leave out:
  -- the one that entered last of those (at even offsets, the rest paired
  -- around it) that could pair with below or above, or else of them all.
  local function leaveOut(first, last, below, above)
    local skip, reach
    for t = first, last, 2 do
      local r = canPair(live[t], below) or canPair(live[t], above)
      if not skip or (r and not reach) or (r == reach and live[t].enq >= live[skip].enq) then
        skip, reach = t, r
      end
    end
    return skip
  end
  -- pairChain pairs a chain's neighbours around skip, while pairs may be
  -- made; it returns whether it paired them all.
  local function pairChain(c)
    c.pairs = {}
    local t = c.first
    while t < c.last do
      if t == c.skip then
        t = t + 1
      elseif made >= maxPairs then
        return false
      else
        used[t], used[t + 1] = true, true
        c.pairs[#c.pairs + 1] = t
        made = made + 1
        t = t + 2
      end
    end
    return true
  end
  -- Candidates as close (and as late) are taken together: those next to
  -- each other form a chain of tickets, of which as many are paired as
  -- can be.
  local k = 1
  while k <= #cands and made < maxPairs do
    local g = k
    while g < #cands and cands[g + 1].late == cands[k].late and cands[g + 1].d == cands[k].d do
      g = g + 1
    end
    local free = {}
    for j = k, g do
      local i = cands[j].i
      if not used[i] and not used[i + 1] then
        free[#free + 1] = i
      end
    end
    local p = 1
    while p <= #free do
      local q = p
      while q < #free and free[q + 1] == free[q] + 1 do
        q = q + 1
      end
      local c = {first = free[p], last = free[q] + 1}
      if (c.last - c.first + 1) % 2 == 1 then
        c.skip = leaveOut(c.first, c.last)
      end
      c.odd = pairChain(c) and c.skip ~= nil
      chains[#chains + 1] = c
      p = q + 1
    end
    k = g + 1
  end
  -- The ticket an odd chain leaves out has, next round, the tickets this
  -- round left free on either side of the chain for neighbours: chosen
  -- again now that they are known, so that it is one that can pair with
  -- them if any can.
  local function nextFree(j, step)
    j = j + step
    while live[j] and used[j] do
      j = j + step
    end
    return live[j]
  end
  for _, c in ipairs(chains) do
    if c.odd and not used[c.skip] then -- not paired by a later group
      local skip = leaveOut(c.first, c.last, nextFree(c.first, -1), nextFree(c.last, 1))
      if skip ~= c.skip then
        for _, i in ipairs(c.pairs) do
          used[i], used[i + 1] = nil, nil
        end
        made = made - #c.pairs
        c.skip = skip
        pairChain(c)
      end
    end
  end
  for _, c in ipairs(chains) do
    for _, i in ipairs(c.pairs) do
      pairAt(i)
    end
  end
  local any = made > before
  local rest = {}
  for i = 1, #live do
    if not used[i] then
      rest[#rest + 1] = live[i]
    end
  end
  live = rest
  return any
end

-- A few rounds make nearly every pair there is; the bound keeps the
-- script short however the ratings fall.
local rounds = 0
while rounds < 8 and #live >= 2 and made < maxPairs and pairOnce() do
  rounds = rounds + 1
end
return {out, expired}
