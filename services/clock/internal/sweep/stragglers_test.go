package sweep

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/deadline"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// stuckGames never answers the deadlines of games named "stuck…" (their
// Redis master is frozen, say) and flags every other game at once,
// recording when each was first asked about, and the most calls it had
// at once.
type stuckGames struct {
	mu          sync.Mutex
	asked       map[string]time.Time
	calls, most int
}

func (g *stuckGames) ExpireDeadline(ctx context.Context, req *gamev1.ExpireDeadlineRequest, _ ...grpc.CallOption) (*gamev1.ExpireDeadlineResponse, error) {
	id := req.GetGameId()
	g.mu.Lock()
	g.calls++
	g.most = max(g.most, g.calls)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.calls--
		g.mu.Unlock()
	}()
	if strings.HasPrefix(id, "stuck") {
		<-ctx.Done()
		return nil, status.Error(codes.DeadlineExceeded, "timed out")
	}
	g.mu.Lock()
	if _, ok := g.asked[id]; !ok {
		g.asked[id] = time.Now()
	}
	g.mu.Unlock()
	if id == probeGameID {
		return &gamev1.ExpireDeadlineResponse{}, nil
	}
	return &gamev1.ExpireDeadlineResponse{Applied: true, Game: &gamev1.Game{GameId: id, Status: commonv1.GameStatus_GAME_STATUS_ENDED,
		Result: &commonv1.Result{Method: commonv1.EndMethod_END_METHOD_TIMEOUT}}}, nil
}

func (g *stuckGames) askedAt(id string) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.asked[id]
	return t, ok
}

// fourShards is an index of four shards on the test's Redis, whose keys
// and the sweeper's go at the end of the test.
func fourShards(t *testing.T) (redis.UniversalClient, *deadline.Index) {
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	idx, err := deadline.New(rdb, prefix, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		keys := []string{prefix + "clock:replicas"}
		for sh := range 4 {
			keys = append(keys, idx.Key(sh), prefix+"dl:lease:{"+strconv.Itoa(sh)+"}")
		}
		rdb.Del(context.Background(), keys...)
	})
	return rdb, idx
}

// TestStuckGamesDoNotDelayOtherGamesFlags: as many games whose calls hang
// (one Redis Cluster master frozen) as the replica has --clock-workers
// took every worker, and the deadline of a healthy game in another shard
// waited for their calls' timeout (--clock-call-timeout, 5 s by default)
// before it was even handed to the game service: its player was flagged
// seconds late, though the game service answered its call at once. A slow
// call now hands its worker on.
func TestStuckGamesDoNotDelayOtherGamesFlags(t *testing.T) {
	rdb, idx := fourShards(t)
	ctx := context.Background()
	games := &stuckGames{asked: map[string]time.Time{}}
	s, err := New(slog.New(slog.DiscardHandler), rdb, idx, games, noop.NewMeterProvider().Meter("test"), Config{ReplicaID: "stuck"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Defaults all: 32 workers, 5 s call timeout.
	now := time.Now()
	var healthy string
	for i := 0; healthy == "" || i < DefaultWorkers; i++ {
		id := "stuck" + strconv.Itoa(i)
		if i >= DefaultWorkers {
			id = "healthy" + strconv.Itoa(i)
		}
		if i < DefaultWorkers || idx.ShardOf(id) != idx.ShardOf("stuck0") {
			at := now.Add(-time.Second)
			if i >= DefaultWorkers {
				at = now.Add(500 * time.Millisecond)
				healthy = id
			}
			if err := idx.Add(ctx, deadline.Entry{GameID: id, At: at}); err != nil {
				t.Fatal(err)
			}
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(runCtx) }()
	defer func() { cancel(); <-done; _ = s.Release(context.Background()) }()

	due := now.Add(500 * time.Millisecond)
	stop := due.Add(8 * time.Second)
	for time.Now().Before(stop) {
		if at, ok := games.askedAt(healthy); ok {
			if late := at.Sub(due); late > time.Second {
				t.Fatalf("the healthy game %s's deadline reached the game service %v after it was due, behind %d stuck games' calls", healthy, late.Round(time.Millisecond), DefaultWorkers)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the healthy game %s's deadline never reached the game service", healthy)
}

// TestStragglersAreBounded: calls that hand their workers on are bounded
// too, so that a game service that stops answering is not sent a call for
// every due entry.
func TestStragglersAreBounded(t *testing.T) {
	rdb, idx := fourShards(t)
	ctx := context.Background()
	games := &stuckGames{asked: map[string]time.Time{}}
	const workers = 2
	s, err := New(slog.New(slog.DiscardHandler), rdb, idx, games, noop.NewMeterProvider().Meter("test"),
		Config{ReplicaID: "bounded", Workers: workers, CallTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 100 {
		if err := idx.Add(ctx, deadline.Entry{GameID: "stuck" + strconv.Itoa(i), At: time.Now().Add(-time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(runCtx) }()
	time.Sleep(2 * time.Second) // calls hang up to 3 s: none ends meanwhile
	cancel()
	<-done
	_ = s.Release(context.Background())
	games.mu.Lock()
	most := games.most
	games.mu.Unlock()
	if want := (1 + stragglersPerWorker) * workers; most != want {
		t.Fatalf("%d calls at once to a game service that answers none, with %d workers; want %d (the workers and their stragglers)", most, workers, want)
	}
}
