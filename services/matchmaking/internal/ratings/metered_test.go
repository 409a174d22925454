package ratings

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/palacehq/palace/pkg/app"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/logging"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game/gametest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// TestARepeatedAbortIsMeteredAsADuplicate: an abort delivered twice (a
// lease changing hands) is metered once as aborted, then as a duplicate,
// as a rated game delivered twice is.
func TestARepeatedAbortIsMeteredAsADuplicate(t *testing.T) {
	f := newFixture(t)
	reader := sdkmetric.NewManualReader()
	c, err := New(Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)), f.store, f.env.Client, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("t"))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := f.ratedGame(t, "gina", "hal", true)
	res := &commonv1.Result{Method: commonv1.EndMethod_END_METHOD_ABORTED}
	for range 2 {
		if err := c.Settle(context.Background(), p, res, commonv1.Side_SIDE_FIRST, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := applied(t, reader); got["aborted"] != 1 || got["duplicate"] != 1 {
		t.Fatalf("metered %v; want aborted 1, duplicate 1", applied(t, reader))
	}
}

// TestAGameThatCannotBeFollowedIsWarnedOfAndMetered: when the game
// service cannot be reached, a pending rated game's rating waits; after a
// few failures in a row this is a warning at the default log level and
// each failure is counted, so missing ratings do not go unseen.
func TestAGameThatCannotBeFollowedIsWarnedOfAndMetered(t *testing.T) {
	f := newFixture(t)
	p, _ := f.ratedGame(t, "ida", "jon", true)
	// A port nothing listens on: every stream fails Unavailable, as with a
	// game service that is down.
	conn, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var logs logging.Buffer
	reader := sdkmetric.NewManualReader()
	c, err := New(Config{ClaimEvery: 20 * time.Millisecond, RetryAfter: time.Millisecond},
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		f.store, gamev1.NewGameServiceClient(conn), sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("t"))
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	eventually(t, "a warning naming the game", func() bool {
		s := logs.String()
		return strings.Contains(s, "level=WARN") && strings.Contains(s, "cannot be followed") && strings.Contains(s, p.Game)
	})
	var failures int64
	for code, n := range followFailures(t, reader) {
		if code != "Unavailable" {
			t.Errorf("failure counted with code %q; want Unavailable", code)
		}
		failures += n
	}
	if failures < warnAfter {
		t.Fatalf("%d failures counted before the warning; want at least %d", failures, warnAfter)
	}
	if !f.pending(t, p.Game) {
		t.Fatal("the game was dropped from the pending set; its rating must wait, not be lost")
	}
}

// TestARenewedConnectionIsNoFailure: the game service renews its
// connections (--max-connection-age), cutting the stream of a rated game
// after the grace each time; the consumer follows on at once, after the
// version it had reached, counting no failure, and rates the game when it
// ends.
func TestARenewedConnectionIsNoFailure(t *testing.T) {
	const age, grace = 150 * time.Millisecond, 100 * time.Millisecond
	f := &fixture{
		env: gametest.StartServing(t, redistest.Addr(t), func(c *app.Config) {
			c.MaxConnectionAge, c.MaxConnectionAgeGrace = age, grace
		}, nil),
		store: store.New(redistest.Client(t), redistest.Prefix(t)),
	}
	reader := sdkmetric.NewManualReader()
	streams := &streamRequests{GameServiceClient: f.env.Client}
	// A failure would hold the follow back for longer than the test waits
	// for the rating.
	c, err := New(Config{ClaimEvery: 20 * time.Millisecond, RetryAfter: time.Minute},
		slog.New(slog.NewTextHandler(io.Discard, nil)), f.store, streams, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("t"))
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	p, tok := f.ratedGame(t, "kim", "lee", true)
	// Several ages and graces: the stream is cut more than once.
	time.Sleep(5 * (age*11/10 + grace))
	f.resign(t, p.Game, tok[commonv1.Side_SIDE_SECOND])
	eventually(t, "the game rated", func() bool { return !f.pending(t, p.Game) })
	if got := followFailures(t, reader); len(got) > 0 {
		t.Fatalf("failures counted by code %v, want none for renewed connections", got)
	}
	after := streams.afterVersions()
	if len(after) < 2 {
		t.Fatalf("%d streams opened; want the first and at least one after a cut", len(after))
	}
	if after[0] != 0 {
		t.Errorf("the first stream resumed after version %d; want the whole log (0)", after[0])
	}
	for i, v := range after[1:] {
		if v == 0 || v < after[i] {
			t.Fatalf("streams resumed after versions %v; want each after the last one reached, none from the start again", after)
		}
	}
}

// streamRequests records the version each StreamEvents call resumes after.
type streamRequests struct {
	gamev1.GameServiceClient
	mu    sync.Mutex
	after []uint64
}

func (s *streamRequests) StreamEvents(ctx context.Context, in *gamev1.StreamEventsRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[gamev1.StreamEventsResponse], error) {
	s.mu.Lock()
	s.after = append(s.after, in.GetAfterVersion())
	s.mu.Unlock()
	return s.GameServiceClient.StreamEvents(ctx, in, opts...)
}

func (s *streamRequests) afterVersions() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.after...)
}

// followFailures reads palace.matchmaking.ratings_follow_failures by
// code, leaving out codes never counted.
func followFailures(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	return counted(t, reader, "palace.matchmaking.ratings_follow_failures", "code")
}

// applied reads palace.matchmaking.ratings_applied by result.
func applied(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	return counted(t, reader, "palace.matchmaking.ratings_applied", "result")
}

// counted reads counter name by the value of its attribute attr, leaving
// out values never counted.
func counted(t *testing.T, reader *sdkmetric.ManualReader, name, attr string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, dp := range s.DataPoints {
					if dp.Value > 0 {
						v, _ := dp.Attributes.Value(attribute.Key(attr))
						got[v.AsString()] += dp.Value
					}
				}
			}
		}
	}
	return got
}

// failNext fails, once armed, the next command (alone or in a pipeline)
// named one of names: after running it when lose is set (its reply lost:
// a reset connection, a wait for replicas that timed out), else instead
// of it (Redis refused the write: a failover).
type failNext struct {
	what        string
	names       []string
	lose        bool
	armed, done atomic.Bool
}

func (f *failNext) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *failNext) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return f.fail(ctx, []redis.Cmder{cmd}, func(ctx context.Context) error { return next(ctx, cmd) })
	}
}
func (f *failNext) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return f.fail(ctx, cmds, func(ctx context.Context) error { return next(ctx, cmds) })
	}
}

func (f *failNext) fail(ctx context.Context, cmds []redis.Cmder, run func(context.Context) error) error {
	for _, c := range cmds {
		if !slices.Contains(f.names, c.Name()) || !f.armed.CompareAndSwap(true, false) {
			continue
		}
		if f.lose {
			if err := run(ctx); err != nil {
				return err
			}
		}
		f.done.Store(true)
		return errors.New("redis: connection reset by peer")
	}
	return run(ctx)
}

// An ending settled again by the same consumer after a failure (its watch
// retries) is metered, and logged, once. The rating or abort count whose
// script ran but whose reply was lost was once metered as a duplicate, so
// the game applied once was never counted as applied: the same consumer's
// retry is now told what its first call applied; and one whose pending
// record could not be removed after was metered twice: it is now metered
// once the game has left pending.
func TestAnEndingSettledAgainIsMeteredOnce(t *testing.T) {
	for _, fault := range []*failNext{
		{what: "its reply lost", names: []string{"evalsha", "eval"}, lose: true},
		{what: "its removal from pending failed", names: []string{"zrem"}},
	} {
		for _, tc := range []struct {
			want   string
			result *commonv1.Result
		}{
			{"rated", &commonv1.Result{Winner: commonv1.Winner_WINNER_FIRST, Method: commonv1.EndMethod_END_METHOD_RESIGNATION}},
			{"aborted", &commonv1.Result{Method: commonv1.EndMethod_END_METHOD_ABORTED}},
		} {
			t.Run(tc.want+", "+fault.what, func(t *testing.T) {
				rdb := redistest.Client(t)
				rdb.AddHook(fault)
				f := &fixture{env: gametest.Start(t, nil), store: store.New(rdb, redistest.Prefix(t))}
				reader := sdkmetric.NewManualReader()
				c, err := New(Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)), f.store, f.env.Client, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("t"))
				if err != nil {
					t.Fatal(err)
				}
				p, _ := f.ratedGame(t, "uma", "vic", true)
				fault.done.Store(false)
				fault.armed.Store(true)
				if err := c.Settle(context.Background(), p, tc.result, commonv1.Side_SIDE_SECOND, time.Time{}); err == nil || !fault.done.Load() {
					t.Fatalf("the first Settle answered %v, its fault injected: %v", err, fault.done.Load())
				}
				if err := c.Settle(context.Background(), p, tc.result, commonv1.Side_SIDE_SECOND, time.Time{}); err != nil {
					t.Fatal(err)
				}
				if got := applied(t, reader); got[tc.want] != 1 || len(got) != 1 {
					t.Fatalf("one game settled twice, applied once: metered %v; want %s 1 alone", got, tc.want)
				}
				// Another consumer delivering the same ending is a duplicate.
				other, err := New(Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)), f.store, f.env.Client, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("t"))
				if err != nil {
					t.Fatal(err)
				}
				if tc.want == "rated" {
					first, second := p.Players()
					if a, err := other.store.ApplyRating(context.Background(), store.Outcome{GameID: p.Game, Kind: commonv1.GameKind(p.Kind), A: first, B: second, ScoreA: 1, At: time.Now(), Applier: other.id}); err != nil || a.Done {
						t.Fatalf("another consumer's rating of the same game: %+v, %v; want not done", a, err)
					}
					if u := f.rating(t, "uma"); u.Games != 1 || u.Rating != 1220 {
						t.Fatalf("uma: %+v", u)
					}
				} else if counted, err := other.store.CountAbort(context.Background(), commonv1.GameKind(p.Kind), p.Game, p.Second, other.id, time.Now(), time.Now()); err != nil || counted {
					t.Fatalf("another consumer's abort count of the same game: %v, %v; want not counted", counted, err)
				}
			})
		}
	}
}
