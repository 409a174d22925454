package clock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/apptest"
	clockv1 "github.com/palacehq/palace/pkg/gen/palace/clock/v1"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/clock"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// endWithin bounds how long a test waits for a game that must end. It is
// generous on purpose: lateness is measured by the load test, not here,
// where a loaded 2-core machine must not make tests flaky.
const endWithin = 20 * time.Second

var reqSeq atomic.Int64

func rid() string { return fmt.Sprintf("r%d-%d", time.Now().UnixNano(), reqSeq.Add(1)) }

// startGame runs a game service; lagOff turns lag compensation off, so
// that a deadline is exactly main time plus periods.
func startGame(t *testing.T, lagOff bool) *gametest.Env {
	t.Helper()
	return gametest.Start(t, func(c *game.Config) {
		if lagOff {
			c.LagMaxPerMove, c.LagBank, c.LagRefill = 0, 0, 0
		}
	})
}

// startClock runs a clock replica on the game service's deadline index.
func startClock(t *testing.T, g *gametest.Env, id string) clockv1.ClockServiceClient {
	t.Helper()
	return startClockWith(t, g, id, nil)
}

func startClockWith(t *testing.T, g *gametest.Env, id string, edit func(*clock.Config)) clockv1.ClockServiceClient {
	t.Helper()
	cfg := clock.DefaultConfig()
	cfg.GameAddr, cfg.KeyPrefix, cfg.DeadlineShards, cfg.ReplicaID = g.Addr, g.Config.KeyPrefix, g.Config.DeadlineShards, id
	if edit != nil {
		edit(&cfg)
	}
	return clockv1.NewClockServiceClient(apptest.Start(t, redistest.Addr(t), clock.Bind(cfg)))
}

func fischer(main time.Duration) *commonv1.TimeControl {
	return &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(main)}}}
}

func byoyomi(main time.Duration, periods uint32, period time.Duration) *commonv1.TimeControl {
	return &commonv1.TimeControl{Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{
		MainTime: durationpb.New(main), Periods: periods, PeriodTime: durationpb.New(period),
	}}}
}

// table is one game with both seats' credentials.
type table struct {
	env   *gametest.Env
	id    string
	seats map[commonv1.Side]string
}

func create(t testing.TB, env *gametest.Env, req *gamev1.CreateGameRequest) *table {
	t.Helper()
	req.RequestId = rid()
	req.Seats = []*gamev1.Seat{
		{Side: commonv1.Side_SIDE_FIRST, PlayerId: "p1"},
		{Side: commonv1.Side_SIDE_SECOND, PlayerId: "p2"},
	}
	resp, err := env.Client.CreateGame(context.Background(), req)
	if err != nil {
		t.Fatalf("CreateGame: %v", err)
	}
	tb := &table{env: env, id: resp.GetGameId(), seats: map[commonv1.Side]string{}}
	for _, c := range resp.GetCredentials() {
		tb.seats[c.GetSide()] = c.GetToken()
	}
	return tb
}

func (tb *table) as(side commonv1.Side) context.Context {
	return gametest.As(context.Background(), tb.seats[side])
}

// play makes the given moves, alternating from the side to move, and
// returns the game after the last one.
func (tb *table) play(t testing.TB, moves ...string) *gamev1.Game {
	t.Helper()
	g := tb.get(t)
	for _, mv := range moves {
		resp, err := tb.tryMove(g.GetTurn(), mv, 0)
		if err != nil {
			t.Fatalf("move %s: %v", mv, err)
		}
		g = resp.GetGame()
	}
	return g
}

func (tb *table) tryMove(side commonv1.Side, mv string, lag time.Duration) (*gamev1.MakeMoveResponse, error) {
	req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: mv}}
	if lag > 0 {
		req.ReportedLag = durationpb.New(lag)
	}
	return tb.env.Client.MakeMove(tb.as(side), req)
}

// get reads the game; a seat's read does not open a stream, so it does
// not count as a connected player.
func (tb *table) get(t testing.TB) *gamev1.Game {
	t.Helper()
	g, err := tb.env.Client.GetGame(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.GetGameRequest{GameId: tb.id})
	if err != nil {
		t.Fatalf("GetGame: %v", err)
	}
	return g.GetGame()
}

func finished(g *gamev1.Game) bool {
	return g.GetStatus() == commonv1.GameStatus_GAME_STATUS_ENDED || g.GetStatus() == commonv1.GameStatus_GAME_STATUS_ABORTED
}

// waitFor polls the game until cond holds, or fails after endWithin.
func (tb *table) waitFor(t testing.TB, what string, cond func(*gamev1.Game) bool) *gamev1.Game {
	t.Helper()
	stop := time.Now().Add(endWithin)
	for {
		g := tb.get(t)
		if cond(g) {
			return g
		}
		if time.Now().After(stop) {
			t.Fatalf("game %s: not %s within %v: status %v, version %d", tb.id, what, endWithin, g.GetStatus(), g.GetVersion())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (tb *table) waitEnded(t testing.TB) *gamev1.Game {
	t.Helper()
	return tb.waitFor(t, "finished", finished)
}

// events reads the game's log up to its current version.
func (tb *table) events(t testing.TB) []*gamev1.Event {
	t.Helper()
	want := tb.get(t).GetVersion()
	ctx, cancel := context.WithTimeout(tb.as(commonv1.Side_SIDE_FIRST), endWithin)
	defer cancel()
	st, err := tb.env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatalf("StreamEvents: %v", err)
	}
	var out []*gamev1.Event
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("StreamEvents of %s: %v", tb.id, err)
		}
		if e := m.GetEvent(); e != nil {
			out = append(out, e)
			if e.GetVersion() >= want {
				break
			}
		}
	}
	return out
}

func gameEnds(evs []*gamev1.Event) int {
	n := 0
	for _, e := range evs {
		if e.GetGameEnded() != nil {
			n++
		}
	}
	return n
}

func wantCode(t testing.TB, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want %v", err, code)
	}
}

// deadlineOf is the last in-time instant of the running side.
func deadlineOf(t testing.TB, g *gamev1.Game) time.Time {
	t.Helper()
	d := g.GetClocks().GetDeadline()
	if d == nil {
		t.Fatalf("game %s has no running deadline: %v", g.GetGameId(), g.GetClocks())
	}
	return d.AsTime()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func redisZ(at time.Time, member string) redis.Z {
	return redis.Z{Score: float64(at.UnixMilli()), Member: member}
}
