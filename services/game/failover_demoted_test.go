package game_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// TestAMoveWaitingWhenItsMasterWasDemotedGotInternal: with
// --redis-wait-replicas, a move whose WAIT was under way when Sentinel
// turned the old master into a replica of the promoted one (a planned
// SENTINEL FAILOVER, or a partitioned master rejoining) got Redis'
// "UNBLOCKED ... (master -> replica?)" answer, and the client INTERNAL.
// The move may or may not survive, as when a wait times out: the client
// is told UNAVAILABLE, to retry with the same request_id.
func TestAMoveWaitingWhenItsMasterWasDemotedGotInternal(t *testing.T) {
	t.Run("sentinel-replicaof", func(t *testing.T) { moveWaitingWhenDemoted(t, false) })
	// FAILOVER: Redis' own coordinated switchover (6.2+), which operators
	// and managed services use for maintenance.
	t.Run("failover-command", func(t *testing.T) { moveWaitingWhenDemoted(t, true) })
}

func moveWaitingWhenDemoted(t *testing.T, failoverCmd bool) {
	pair := redistest.NewPair(t)
	env := gametest.StartOn(t, pair.Master.Addr, func(c *game.Config) {
		c.SigningKeys, c.WaitReplicas, c.WaitTimeout = keyOne, 1, 10*time.Second
	})
	tb := xiangqi(t, env)
	tb.move(t, "h3e3")
	master := pair.Master.Client(t)
	key := env.Config.KeyPrefix + "{g:" + tb.id + "}"
	version := func() uint64 {
		v, _ := master.HGet(context.Background(), key, "v").Result()
		n, _ := strconv.ParseUint(v, 10, 64)
		return n
	}
	before := version()

	pair.Link.Blackhole() // the replica stops getting writes, as one cut off does
	done := make(chan error, 1)
	go func() {
		_, err := env.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.MakeMoveRequest{
			GameId: tb.id, RequestId: "second", Move: &commonv1.Move{Coordinate: "h10g8"}})
		done <- err
	}()
	for until := time.Now().Add(5 * time.Second); version() <= before; time.Sleep(time.Millisecond) {
		if time.Now().After(until) {
			t.Fatal("the move never landed on the master")
		}
	}
	time.Sleep(100 * time.Millisecond) // its WAIT is under way
	// Sentinel's failover: promote the replica, then make the old master
	// its replica.
	ctx := context.Background()
	host, port, _ := net.SplitHostPort(pair.Replica.Addr)
	if failoverCmd {
		// The replica follows the master through the link: FAILOVER TO
		// names it as the master sees it.
		info, _ := master.Info(ctx, "replication").Result()
		lhost, lport := "", ""
		for _, line := range strings.Split(info, "\n") {
			if strings.HasPrefix(line, "slave0:") {
				for _, kv := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "slave0:")), ",") {
					k, v, _ := strings.Cut(kv, "=")
					switch k {
					case "ip":
						lhost = v
					case "port":
						lport = v
					}
				}
			}
		}
		if err := master.Do(ctx, "FAILOVER", "TO", lhost, lport, "FORCE", "TIMEOUT", "300").Err(); err != nil {
			t.Fatal(err)
		}
	} else {
		if err := pair.Replica.Client(t).ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
			t.Fatal(err)
		}
		if err := master.ReplicaOf(ctx, host, port).Err(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("move whose wait for replicas was cut by the failover: %v (code %v), want Unavailable (retry with the same request_id)", err, status.Code(err))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the move was never answered")
	}
}

// TestAPlannedFailoverLosesNoMoveWaitedForOnEveryReplica follows, step by
// step, what Sentinel does in a SENTINEL FAILOVER of a master with two
// replicas: it promotes one (REPLICAOF NO ONE), and only later (about a
// second) reconfigures the other and publishes +switch-master, which is
// when clients leave the old master. A move committed on the old master
// in between, confirmed by the replica not yet reconfigured, would be
// acknowledged with --redis-wait-replicas 1 and then lost, that replica
// and the old master resyncing from the new one; waiting for both
// replicas, it is refused UNAVAILABLE, and its retry on the new master is
// applied once (deploy/README.md).
func TestAPlannedFailoverLosesNoMoveWaitedForOnEveryReplica(t *testing.T) {
	ctx := context.Background()
	m := redistest.Own(t)
	r1, r2 := redistest.Replica(t, m.Addr), redistest.Replica(t, m.Addr)
	cfg := func(prefix string) func(c *game.Config) {
		return func(c *game.Config) {
			c.SigningKeys, c.WaitReplicas, c.WaitTimeout = keyOne, 2, time.Second
			if prefix != "" {
				c.KeyPrefix = prefix
			}
		}
	}
	env := gametest.StartOn(t, m.Addr, cfg(""))
	tb := xiangqi(t, env)
	tb.move(t, "h3e3")

	// Sentinel promotes r1.
	if err := r1.Client(t).ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	// The game service still writes to the old master, as Sentinel names
	// it until the failover ends; only r2 still replicates it.
	second := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: "second", Move: &commonv1.Move{Coordinate: "h10g8"}}
	if _, err := env.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), second); status.Code(err) != codes.Unavailable {
		t.Fatalf("move during the failover, confirmed by one replica of the two: %v, want Unavailable", err)
	}
	// Sentinel reconfigures r2, then the old master, to follow r1.
	host, port, _ := net.SplitHostPort(r1.Addr)
	for _, s := range []*redistest.Server{r2, m} {
		if err := s.Client(t).ReplicaOf(ctx, host, port).Err(); err != nil {
			t.Fatal(err)
		}
	}
	d := gametest.StartOn(t, r1.Addr, cfg(env.Config.KeyPrefix))
	tb.env = d
	// The retry waits for r1's two replicas to catch up.
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err = d.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), second); status.Code(err) != codes.Unavailable {
			break
		}
	}
	if err != nil {
		t.Fatalf("the retry on the new master: %v", err)
	}
	if n := len(tb.get(t).GetMoves()); n != 2 {
		t.Fatalf("after the failover and the retry the game holds %d moves, want 2", n)
	}
}
