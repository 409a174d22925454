-- Read a game's state fields and its moves in one step. Read apart, even
-- in one pipeline, a commit can fall between the two (on Redis Cluster, on
-- the in-process Redis of `make run`), pairing a state with the moves of
-- the next version: a snapshot then holds a move its stream sends again.
-- KEYS[1] state hash, KEYS[2] moves list; ARGV the state's fields to read.
return {redis.call('HMGET', KEYS[1], unpack(ARGV)), redis.call('LRANGE', KEYS[2], 0, -1)}
