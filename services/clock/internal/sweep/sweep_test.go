package sweep

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/palacehq/palace/pkg/deadline"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

func newTestService(t *testing.T) *Service {
	t.Helper()
	// Never dialled: decide does not touch Redis.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	idx, err := deadline.New(rdb, "p:", 4)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(slog.New(slog.DiscardHandler), rdb, idx, nil, noop.NewMeterProvider().Meter("test"), Config{ReplicaID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDecide covers what happens to an entry after the game service's
// answer: only a deadline still ahead of the game's own clock is kept.
func TestDecide(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_000)
	ms := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(at.Add(d)) }
	running := &commonv1.ClockSnapshot{Running: commonv1.Side_SIDE_FIRST, AsOf: ms(5 * time.Millisecond)}
	tests := []struct {
		name       string
		resp       *gamev1.ExpireDeadlineResponse
		wantKind   string
		wantRemove bool
		wantFlags  uint64
		// after is how long after the deadline the answer comes (10 ms
		// when zero).
		after time.Duration
	}{
		{name: "unknown game, a recent deadline: it may be being created", resp: &gamev1.ExpireDeadlineResponse{}, wantKind: "recheck"},
		{name: "unknown game, an old deadline", resp: &gamev1.ExpireDeadlineResponse{}, after: DefaultStaleAfter, wantKind: "stale", wantRemove: true},
		{name: "finished game", resp: &gamev1.ExpireDeadlineResponse{Game: &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_ENDED}}, wantKind: "stale", wantRemove: true},
		{name: "recent deadline that is not current", resp: &gamev1.ExpireDeadlineResponse{Game: &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_ONGOING, Clocks: running}}, wantKind: "recheck"},
		{name: "recent deadline of a game without clock", resp: &gamev1.ExpireDeadlineResponse{Game: &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_SETUP}}, wantKind: "recheck"},
		{name: "old replaced deadline", resp: &gamev1.ExpireDeadlineResponse{Game: &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_ONGOING,
			Clocks: &commonv1.ClockSnapshot{Running: commonv1.Side_SIDE_FIRST, AsOf: ms(DefaultStaleAfter + time.Millisecond)}}}, wantKind: "stale", wantRemove: true},
		{name: "not due on the game's clock", resp: &gamev1.ExpireDeadlineResponse{Game: &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_ONGOING,
			Clocks: &commonv1.ClockSnapshot{AsOf: ms(-3 * time.Millisecond)}}}, wantKind: "retry"},
		{name: "flag", resp: &gamev1.ExpireDeadlineResponse{Applied: true, Game: &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_ENDED,
			Result: &commonv1.Result{Method: commonv1.EndMethod_END_METHOD_TIMEOUT}, EndedAt: ms(7 * time.Millisecond)}}, wantKind: "flag", wantRemove: true, wantFlags: 1},
		{name: "abort", resp: &gamev1.ExpireDeadlineResponse{Applied: true, Game: &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_ABORTED, EndedAt: ms(0)}}, wantKind: "abort", wantRemove: true},
		{name: "byo-yomi milestone", resp: &gamev1.ExpireDeadlineResponse{Applied: true, Game: &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_ONGOING, Clocks: running}}, wantKind: "milestone", wantRemove: true},
		{name: "default formation", resp: &gamev1.ExpireDeadlineResponse{Applied: true, Game: &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_SETUP}}, wantKind: "setup", wantRemove: true},
		{name: "a formation's deadline moved by an outage", resp: &gamev1.ExpireDeadlineResponse{Applied: true, Excused: true, Game: &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_SETUP}}, wantKind: "excuse", wantRemove: true},
		{name: "a turn's deadline moved by an outage", resp: &gamev1.ExpireDeadlineResponse{Applied: true, Excused: true, Game: &gamev1.Game{Status: commonv1.GameStatus_GAME_STATUS_ONGOING, Clocks: running}}, wantKind: "excuse", wantRemove: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestService(t)
			after := tt.after
			if after == 0 {
				after = 10 * time.Millisecond
			}
			o := s.decide(context.Background(), at.UnixMilli(), tt.resp, at.Add(after))
			if o.kind != tt.wantKind || o.remove != tt.wantRemove {
				t.Fatalf("decide = %+v, want kind %s, remove %v", o, tt.wantKind, tt.wantRemove)
			}
			var flags uint64
			for _, b := range s.late.buckets() {
				flags += b.Count
			}
			if flags != tt.wantFlags {
				t.Fatalf("%d flags in the lateness histogram, want %d", flags, tt.wantFlags)
			}
		})
	}
}

func TestHistogramBuckets(t *testing.T) {
	h := newHistogram()
	for _, ms := range []float64{0, 1, 1.5, 49, 50, 51, 5000, 60000} {
		h.observe(ms)
	}
	got := map[float64]uint64{}
	for _, b := range h.buckets() {
		got[b.LeMs] = b.Count
	}
	want := map[float64]uint64{1: 2, 2: 1, 50: 2, 100: 1, 5000: 1, 0: 1}
	for le, n := range want {
		if got[le] != n {
			t.Errorf("bucket le %v: %d, want %d (all: %v)", le, got[le], n, got)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{name: "defaults", cfg: Config{}},
		{name: "lease of three ticks", cfg: Config{LeaseTTL: 300 * time.Millisecond, Tick: 100 * time.Millisecond}},
		{name: "lease shorter than three ticks", cfg: Config{LeaseTTL: 250 * time.Millisecond, Tick: 100 * time.Millisecond}, wantErr: true},
		{name: "huge batch", cfg: Config{Batch: 20000}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestAliveWindowIsShorterThanTheLease(t *testing.T) {
	for _, c := range []Config{{}, {LeaseTTL: 300 * time.Millisecond, Tick: 100 * time.Millisecond}, {LeaseTTL: 2 * time.Second, Tick: 100 * time.Millisecond}} {
		c = c.withDefaults()
		// Equal is tolerated only at the 3-tick minimum, where the
		// window must still span two ticks.
		if w := c.aliveWindow(); w > c.LeaseTTL || w < 2*c.Tick {
			t.Errorf("%v/%v: alive window %v", c.LeaseTTL, c.Tick, w)
		}
	}
}

// TestEntriesPastTheInFlightLimitKeepTheirBackoff: a complete read lists
// more due entries than may be in flight; those it cannot start yet are
// still listed, so a failed one keeps its retry backoff instead of being
// called again at once.
func TestEntriesPastTheInFlightLimitKeepTheirBackoff(t *testing.T) {
	s := newTestService(t)
	s.cfg.Batch = 1
	sh := newShard(0, "k")
	now := time.Now()
	sh.inflight["a"] = true // the limit is reached
	sh.retry["c"] = &retryState{at: now.Add(time.Second), backoff: time.Second}
	s.dispatch(context.Background(), sh, dueSet{members: []string{"a", "b", "c"}, nowMs: now.UnixMilli()}, 10, now, now)
	if r := sh.retry["c"]; r == nil || r.backoff != time.Second {
		t.Fatalf("the retry state of an entry past the in-flight limit: %+v; want it kept", r)
	}
}
