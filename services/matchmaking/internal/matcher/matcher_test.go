package matcher

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game/gametest"
	"github.com/palacehq/palace/services/matchmaking/internal/games"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// TestStalledMatchIsCompleted: a replica pairs two tickets and dies before
// creating their game. Another replica takes the match over after
// StallAfter and creates the game; completing it again (a late retry of
// the first replica) finds the same game and changes nothing.
func TestStalledMatchIsCompleted(t *testing.T) {
	env := gametest.Start(t, nil)
	st := store.New(redistest.Client(t), redistest.Prefix(t))
	ctx := context.Background()
	pool := store.Pool{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Control: clock.Default()}
	now := time.Now()
	for _, p := range []string{"p1", "p2"} {
		if _, _, err := st.Enter(ctx, pool, store.Ticket{Player: p, Name: p, Rating: 1200, Entered: now, Expires: now.Add(time.Hour)}, "r", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	// The "crashed" replica's pass: paired, never completed.
	res := st.Pair(ctx, []store.Pool{pool}, store.PairParams{Now: now, BaseWindow: 100, MaxPairs: 10, Keep: time.Hour})
	if len(res) != 1 || res[0].Err != nil || len(res[0].Matches) != 1 {
		t.Fatalf("pair: %+v", res)
	}
	mt := res[0].Matches[0]

	m, err := New(Config{Interval: 20 * time.Millisecond, StallAfter: 300 * time.Millisecond, Keep: time.Hour, IdleAfter: time.Hour},
		slog.New(slog.NewTextHandler(io.Discard, nil)), st, games.New(env.Client, st, time.Hour), noop.NewMeterProvider().Meter("t"))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { m.Run(runCtx); close(done) }()
	defer func() { cancel(); <-done }()

	deadline := time.Now().Add(10 * time.Second)
	var a, b store.Ticket
	for {
		a, b, err = st.Tickets(ctx, pool, mt)
		if err != nil {
			t.Fatal(err)
		}
		if a.State == store.StateMatched && b.State == store.StateMatched {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stalled match never completed: %+v %+v", a, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a.Game == "" || a.Game != b.Game || a.Side == b.Side || a.Opponent != b.Player {
		t.Fatalf("tickets %+v %+v", a, b)
	}
	// A late retry of the dead replica: same game, nothing changes.
	if err := m.Complete(ctx, pool, mt); err != nil {
		t.Fatal(err)
	}
	a2, _, _ := st.Tickets(ctx, pool, mt)
	if a2.Game != a.Game || a2.Token != a.Token {
		t.Fatalf("retry changed the ticket: %+v -> %+v", a, a2)
	}
}
