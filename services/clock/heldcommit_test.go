package clock_test

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/deadline"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/clock"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// TestAHeldCommitsDeadlineOutlivesItsProcess: game process a judges
// Red's move and indexes Black's new deadline W (Black has about 0.4 s
// left); its commit is held 2.5 s (a process paused between indexing and
// committing, or Redis holding the write). The sweeper finds W due, asks
// the game service, which still has Red to move, and once W is older than
// --clock-stale-after drops it as stale. The commit then lands and makes W
// current, and a dies before its excuse of the hold, the only step that
// would index a deadline again, lands: Black, who never moves, must still
// be flagged, though nobody is connected. Process a dies before the
// excuse's commit (the excuse's entry indexed, W+hold, is not the game's
// deadline), or before the excuse's entry (nothing but the entry a had
// before). --clock-stale-after is 500 ms to keep the test short; by
// default a pause of about 10 s does the same.
func TestAHeldCommitsDeadlineOutlivesItsProcess(t *testing.T) {
	for _, c := range []struct {
		name string
		// dies tells, of the commands a holds after the move landed, the
		// one it dies before.
		dies func(id string, held []byte) bool
	}{
		{"before the excuse's commit", isCommitOf},
		{"before the excuse's entry", func(id string, held []byte) bool {
			return isCommitOf(id, held) || bytes.Contains(bytes.ToLower(held), []byte("zadd")) && bytes.Contains(held, []byte(id+"|"))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := startGame(t, true)
			proxy := redistest.NewProxy(t, redistest.Addr(t))
			a := gametest.StartOn(t, proxy.Addr(), func(c *game.Config) {
				c.LagMaxPerMove, c.LagBank, c.LagRefill = 0, 0, 0
				c.KeyPrefix, c.SigningKeys = b.Config.KeyPrefix, b.Config.SigningKeys
			})
			startClockWith(t, b, "", func(c *clock.Config) { c.StaleAfter = 500 * time.Millisecond })
			const main = 4 * time.Second
			tb := create(t, a, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer(main), Public: true})
			tb.play(t, "h3e3", "h10g8", "c4c5")
			time.Sleep(main - 400*time.Millisecond)
			tb.play(t, "b10c8") // Black has about 0.4 s left; Red's clock runs

			// What the proxy holds, changed as the test goes on while the
			// goroutine below passes everything else.
			var holding atomic.Pointer[func([]byte) bool]
			commits := func(held []byte) bool { return isCommitOf(tb.id, held) }
			holding.Store(&commits)
			held := func(b []byte) bool { return (*holding.Load())(b) }
			proxy.Hold()
			defer proxy.Restore()
			stop, passed := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(passed)
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
						proxy.Pass(func(b []byte) bool { return !held(b) })
					}
				}
			}()
			done := make(chan error, 1)
			go func() {
				_, err := a.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{
					GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "b1c3"}})
				done <- err
			}()
			waitHeld := func(what string, match func([]byte) bool) {
				for until := time.Now().Add(5 * time.Second); !proxy.Holds(match); time.Sleep(time.Millisecond) {
					if time.Now().After(until) {
						t.Fatalf("%s was never held", what)
					}
				}
			}
			waitHeld("the move's commit", commits)
			time.Sleep(2500 * time.Millisecond)
			dies := func(b []byte) bool { return c.dies(tb.id, b) }
			holding.Store(&dies)
			proxy.Pass(commits) // the move lands
			waitHeld("what a dies before", dies)
			close(stop)
			<-passed
			proxy.Cut() // a is cut off from Redis for good
			<-done

			// Black never moves: the sweeper must end the game on time.
			tb = &table{env: b, id: tb.id, seats: tb.seats}
			for stopAt := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				g := tb.get(t)
				if finished(g) {
					if g.GetResult().GetMethod() != commonv1.EndMethod_END_METHOD_TIMEOUT {
						t.Fatalf("the game ended by %v, want on time", g.GetResult().GetMethod())
					}
					return
				}
				if time.Now().After(stopAt) {
					t.Fatalf("Black's time ran out long ago, and the game is still %v 10 s on, its clock running %v, deadline %v ago; the game's entries in the index: %v",
						g.GetStatus(), g.GetClocks().GetRunning(), time.Since(g.GetClocks().GetDeadline().AsTime()).Round(time.Millisecond), indexed(t, b, tb.id))
				}
			}
		})
	}
}

// isCommitOf tells whether held commands hold a commit of game id.
func isCommitOf(id string, held []byte) bool {
	held = bytes.ToLower(held)
	return bytes.Contains(held, []byte("evalsha")) && bytes.Contains(held, []byte(strings.ToLower(id)))
}

// indexed lists the entries of game id in the deadline index of env.
func indexed(t *testing.T, env *gametest.Env, id string) []string {
	t.Helper()
	idx, err := deadline.New(env.Redis, env.Config.KeyPrefix, env.Config.DeadlineShards)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := env.Redis.ZRange(context.Background(), idx.Key(idx.ShardOf(id)), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, e := range entries {
		if strings.HasPrefix(e, id+"|") {
			mine = append(mine, e)
		}
	}
	return mine
}
