package game_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

func redisClients(t *testing.T, env *gametest.Env) int {
	t.Helper()
	info, err := env.Redis.Info(context.Background(), "clients").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`connected_clients:(\d+)`).FindStringSubmatch(info)
	if m == nil {
		t.Fatalf("no connected_clients in %q", info)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// openStreams reports the server's palace_game_streams gauge.
func openStreams(t *testing.T, env *gametest.Env) int {
	t.Helper()
	resp, err := http.Get("http://" + env.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^palace_game_streams\{[^}]*\} (\d+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatal("no palace_game_streams gauge on /metrics")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func within(t *testing.T, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
	}
}

// countdown counts streams down to none left. Waiting for it fails once
// none has counted down for a while, not after a set time: under the race
// detector on a busy machine, 10,000 streams take minutes.
type countdown struct {
	left atomic.Int64
	none chan struct{}
}

func newCountdown(n int) *countdown {
	c := &countdown{none: make(chan struct{})}
	c.left.Store(int64(n))
	return c
}

func (c *countdown) Done() {
	if c.left.Add(-1) == 0 {
		close(c.none)
	}
}

func (c *countdown) wait(t *testing.T, quiet time.Duration, what string) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	left, moved := c.left.Load(), time.Now()
	for {
		select {
		case <-c.none:
			return
		case <-tick.C:
		}
		if n := c.left.Load(); n != left {
			left, moved = n, time.Now()
		} else if time.Since(moved) > quiet {
			t.Fatalf("%s: %d streams left, none done for %v", what, n, quiet)
		}
	}
}

// TestTenThousandStreamsInOneProcess has 10,000 spectators watch 100 games
// through one game service: the process must serve them all from a few
// Redis connections and deliver each move to every one of them.
func TestTenThousandStreamsInOneProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 10,000 streams; run without -short")
	}
	const games, perGame = 100, 100
	// The production heartbeat (gametest's is 200ms, for the heartbeat
	// tests): 10,000 streams beating 5 times a second would be the load.
	env := gametest.Start(t, func(c *game.Config) { c.Heartbeat = 15 * time.Second })
	clients := []gamev1.GameServiceClient{env.Client}
	for range 3 {
		cc, err := grpc.NewClient(env.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		clients = append(clients, gamev1.NewGameServiceClient(cc))
	}
	tables := make([]*table, games)
	versions := make([]uint64, games)
	for i := range tables {
		tables[i] = xiangqi(t, env)
		versions[i] = tables[i].get(t).GetVersion()
	}
	before := redisClients(t, env)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	caughtUp, moved := newCountdown(games*perGame), newCountdown(games*perGame)
	errs := make(chan error, games*perGame)
	for i := range games * perGame {
		g := i % games
		go func() {
			defer moved.Done()
			st, err := clients[i%len(clients)].StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tables[g].id})
			if err != nil {
				caughtUp.Done()
				errs <- err
				return
			}
			// Counted down exactly once, whether the stream catches up or
			// fails before it does.
			caught := false
			catchUp := func() {
				if !caught {
					caught = true
					caughtUp.Done()
				}
			}
			var want uint64
			for {
				m, err := st.Recv()
				if err != nil {
					catchUp()
					errs <- fmt.Errorf("stream of game %d at version %d: %w", g, want, err)
					return
				}
				e := m.GetEvent()
				if e == nil {
					continue
				}
				if e.GetVersion() == versions[g] {
					catchUp()
				}
				if e.GetVersion() == versions[g]+1 {
					if e.GetMovePlayed().GetMove().GetCoordinate() != "h3e3" {
						errs <- fmt.Errorf("game %d: event %d is %v, want the move h3e3", g, e.GetVersion(), e)
					}
					return
				}
				want = e.GetVersion()
			}
		}()
	}
	start := time.Now()
	caughtUp.wait(t, 30*time.Second, "10,000 streams catching up")
	t.Logf("10,000 streams open in %v", time.Since(start))
	if n := openStreams(t, env); n != games*perGame {
		t.Fatalf("the server counts %d open streams, want %d", n, games*perGame)
	}
	// Other test packages share this Redis, so the count moves a little;
	// one connection per stream would add 10,000.
	if added := redisClients(t, env) - before; added > 200 {
		t.Fatalf("10,000 streams added %d Redis connections", added)
	}
	for _, tb := range tables {
		tb.move(t, "h3e3")
	}
	moved.wait(t, 30*time.Second, "every stream getting its game's move")
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestSlowReaderDelaysOnlyItself keeps one stream of a game unread while
// the game goes on: another stream of it must get every event at once,
// and the stalled one, when it reads again, every event exactly once.
func TestSlowReaderDelaysOnlyItself(t *testing.T) {
	// No heartbeat while the test runs: the fast stream must keep up from
	// the notifications alone. Every seat stream's coming and going is
	// announced.
	env := gametest.Start(t, func(c *game.Config) { c.Heartbeat, c.PresenceGrace = time.Minute, 0 })
	tb := xiangqi(t, env)
	// A fixed 64 KiB flow-control window (no dynamic growth), so that the
	// server's sends to the stalled stream soon block.
	const window = 1 << 16
	slowConn, err := grpc.NewClient(env.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(window), grpc.WithInitialConnWindowSize(window))
	if err != nil {
		t.Fatal(err)
	}
	defer slowConn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow, err := gamev1.NewGameServiceClient(slowConn).StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := slow.Recv(); err != nil {
		t.Fatal(err)
	}
	fast, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		version uint64
		size    int
	}
	// Room for every event the loop below may make, so that the fast
	// reader never waits for the test.
	fastSeen := make(chan got, 1<<18)
	var fastBytes atomic.Int64 // as flow control counts them
	go func() {
		defer close(fastSeen)
		for {
			m, err := fast.Recv()
			if err != nil {
				return
			}
			if e := m.GetEvent(); e != nil {
				fastBytes.Add(int64(proto.Size(m)) + 5)
				fastSeen <- got{e.GetVersion(), proto.Size(m)}
			}
		}
	}()
	// Seats connecting and going: events that do not end the game, and
	// that a client may make without end (draw offers wait for a move).
	// The cycles go on until the events are well past what blocks the
	// stalled stream's sends, which takes minutes on a busy machine under
	// the race detector: the fast stream fails when its events stop
	// coming, not after a set time.
	const stall = 30 * time.Second
	started := time.Now()
	grown, seen := started, int64(0)
	for i := 0; fastBytes.Load() < 4*window; i++ {
		if n := fastBytes.Load(); n > seen {
			grown, seen = time.Now(), n
		}
		if i == 1<<18 || time.Since(grown) > stall {
			t.Fatalf("after %d seat stream cycles in %v the fast stream has %d bytes of events, none new for %v: stuck behind the unread one, or too few events", i, time.Since(started).Round(time.Second), fastBytes.Load(), stall)
		}
		side := commonv1.Side_SIDE_FIRST
		if i%2 == 1 {
			side = commonv1.Side_SIDE_SECOND
		}
		sctx, scancel := context.WithTimeout(gametest.As(ctx, tb.seats[side]), 10*time.Second)
		s, err := env.Client.StreamEvents(sctx, &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
		if err == nil {
			_, err = s.Recv()
		}
		if err == nil {
			// The seat's connecting is recorded after the snapshot is
			// sent: a stream closed at once often closed first on a busy
			// machine, and the cycle announced nothing. The event after
			// the snapshot, mostly its own connecting, tells it was
			// recorded. None comes while the seat's stream of two cycles
			// ago is still open here: the cycle then ends after a
			// moment, having announced nothing, which is no failure.
			moment := time.AfterFunc(250*time.Millisecond, scancel)
			_, err = s.Recv()
			if !moment.Stop() {
				err = nil
			}
		}
		scancel()
		if err != nil {
			t.Fatalf("seat stream %d: %v", i, err)
		}
	}
	last := tb.get(t).GetVersion()
	deadline := time.After(10 * time.Second)
	bytes := 0
	for next := uint64(1); next <= last; {
		select {
		case g, ok := <-fastSeen:
			if !ok {
				t.Fatal("the fast stream ended")
			}
			if g.version != next {
				t.Fatalf("fast stream: version %d, want %d", g.version, next)
			}
			bytes += g.size
			next++
		case <-deadline:
			t.Fatalf("the fast stream is stuck at version %d of %d behind the unread one", next-1, last)
		}
	}
	// The server's sends block once the client's window and the
	// server's own write quota (64 KiB each) are full; flow control
	// counts each message with its 5-byte gRPC prefix.
	if sent := bytes + 5*int(last); sent < 3*window {
		t.Fatalf("only %d bytes of events: too few to block the stalled stream's sends", sent)
	}
	// Now the stalled reader reads: everything, once, in order.
	for next := uint64(2); next <= last; {
		m, err := slow.Recv()
		if err != nil {
			t.Fatal(err)
		}
		e := m.GetEvent()
		if e == nil {
			continue // a heartbeat
		}
		if e.GetVersion() != next {
			t.Fatalf("slow stream: version %d, want %d", e.GetVersion(), next)
		}
		next++
	}
}

// TestClosedStreamsLeaveNothingBehind opens and closes streams by the
// hundred, as apps reconnecting at once do: once they are gone, the
// process must hold no stream, no subscription to Redis and none of
// their goroutines.
func TestClosedStreamsLeaveNothingBehind(t *testing.T) {
	env := gametest.Start(t, func(c *game.Config) { c.Heartbeat = 15 * time.Second })
	const games, streams = 20, 500
	tables := make([]*table, games)
	for i := range tables {
		tables[i] = xiangqi(t, env)
	}
	channels := func() []string {
		t.Helper()
		chs, err := env.Redis.PubSubChannels(context.Background(), env.Config.KeyPrefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return chs
	}
	// A stream opened and closed first, so that the connection's own
	// goroutines are counted before.
	wctx, wcancel := context.WithCancel(context.Background())
	warm, err := env.Client.StreamEvents(wctx, &gamev1.StreamEventsRequest{GameId: tables[0].id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Recv(); err != nil {
		t.Fatal(err)
	}
	wcancel()
	for openStreams(t, env) != 0 {
		time.Sleep(10 * time.Millisecond)
	}
	before := runtime.NumGoroutine()

	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := range streams {
		wg.Go(func() {
			tb := tables[i%games]
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if i%5 == 0 {
				// Seats' streams too, a few per seat: they also record
				// presence.
				tb = tables[(i/5)%games]
				ctx = tb.as(commonv1.Side(1 + (i/5/games)%2))
			}
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: i%3 == 0})
			if err == nil && i%4 != 0 {
				// Three in four read before closing, the others close at
				// once.
				_, err = st.Recv()
			}
			if err != nil {
				errs <- err
			}
		})
	}
	within(t, &wg, time.Minute, "streams opened and closed")
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, chs, g := openStreams(t, env), channels(), runtime.NumGoroutine()
		// A leak of one goroutine per stream would add hundreds.
		if n == 0 && len(chs) == 0 && g < before+50 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d streams closed: %d still counted open, subscribed to %v, %d goroutines (%d before)", streams, n, chs, g, before)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
