package app

import (
	"flag"
	"time"

	"github.com/palacehq/palace/pkg/deadline"
)

// Flags that several services take, defined here once so that every
// binary names, defaults and describes them alike: a deployment sets them
// in one block of environment variables that every process reads.

// KeyPrefixFlag defines --key-prefix.
func KeyPrefixFlag(fs *flag.FlagSet, p *string) {
	StringFlag(fs, p, "key-prefix", "", "prefix of every Redis key; the same in every service of a deployment")
}

// GameAddrFlag defines --game-addr, the game service a daemon calls;
// palace serve has no such flag, since it runs the game service itself.
func GameAddrFlag(fs *flag.FlagSet, p *string) {
	StringFlag(fs, p, "game-addr", "", "game service host:port (required)")
}

// DeadlineShardsFlag defines --deadline-shards: the game service writes
// the deadline index and the clock service sweeps it.
func DeadlineShardsFlag(fs *flag.FlagSet, p *int) {
	IntFlag(fs, p, "deadline-shards", deadline.DefaultShards, "shards of the deadline index; the same in the game and clock services")
}

// WaitReplicasFlags defines --redis-wait-replicas and --redis-wait-timeout.
func WaitReplicasFlags(fs *flag.FlagSet, replicas *int, timeout *time.Duration) {
	IntFlag(fs, replicas, "redis-wait-replicas", 0, "acknowledge a write (a move or other game command; a ticket, invite, rematch, created game or rating) only once this many Redis replicas hold it (WAIT), so that a failover to a replica loses none that was acknowledged; 0: once the master has it")
	DurationFlag(fs, timeout, "redis-wait-timeout", time.Second, "how long a write waits for --redis-wait-replicas before it answers Unavailable (the client retries with the same request_id)")
}
