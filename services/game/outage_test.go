package game_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/deadline"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// outageGame is a Xiangqi game of 3 s a side, no increment, past both
// first moves: Red's clock runs.
func outageGame(t *testing.T, env *gametest.Env) *table {
	t.Helper()
	return outageGameOf(t, env, 3*time.Second)
}

// outageGameOf is outageGame of main a side.
func outageGameOf(t *testing.T, env *gametest.Env, main time.Duration) *table {
	t.Helper()
	clocked := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(main)}}}
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: clocked})
	tb.move(t, "h3e3")
	tb.move(t, "h10g8")
	return tb
}

// redMovesOnANewProcess starts a game process beside env's and sends Red's
// move h1g3 in tb's game to it, returning the game as that process serves
// it and the move's answer.
func redMovesOnANewProcess(t *testing.T, env *gametest.Env, tb *table) (*table, *gamev1.MakeMoveResponse, error) {
	t.Helper()
	later := gametest.Start(t, func(c *game.Config) { c.KeyPrefix, c.SigningKeys = env.Config.KeyPrefix, keyOne })
	on := &table{env: later, id: tb.id, seats: tb.seats}
	resp, err := later.Client.MakeMove(on.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h1g3"}})
	return on, resp, err
}

// eventsAfter reads the game's events after version v, up to its head.
func eventsAfter(t *testing.T, tb *table, v uint64) []*gamev1.Event {
	t.Helper()
	head := tb.get(t).GetVersion()
	ctx, cancel := context.WithTimeout(tb.as(commonv1.Side_SIDE_FIRST), 10*time.Second)
	defer cancel()
	st, err := tb.env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: v})
	if err != nil {
		t.Fatal(err)
	}
	var evs []*gamev1.Event
	for len(evs) == 0 || evs[len(evs)-1].GetVersion() < head {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("events after %d: %v", v, err)
		}
		if e := m.GetEvent(); e != nil {
			evs = append(evs, e)
		}
	}
	return evs
}

// wantExcused checks that evs hold one OUTAGE_EXCUSED event for Red of at
// least min, and returns its version.
func wantExcused(t *testing.T, evs []*gamev1.Event, least time.Duration) uint64 {
	t.Helper()
	for _, e := range evs {
		c := e.GetClock()
		if c.GetKind() != gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED {
			continue
		}
		if c.GetSide() != commonv1.Side_SIDE_FIRST || c.GetExcused().AsDuration() < least || c.GetClocks() == nil {
			t.Fatalf("excuse event %v: want Red excused at least %v, with the clocks", c, least)
		}
		return e.GetVersion()
	}
	t.Fatalf("no OUTAGE_EXCUSED event among %v", evs)
	return 0
}

// cutOff is a game played on a process with Redis (direct), and a second
// process whose Redis goes through a proxy (cut off), which has cached
// nothing of it: what the second does after its outage, it does in answer
// to a call, not on its own.
func cutOff(t *testing.T) (direct, cut *gametest.Env, proxy *redistest.Proxy, tb *table) {
	t.Helper()
	direct = gametest.Start(t, func(c *game.Config) { c.SigningKeys = keyOne })
	proxy = redistest.NewProxy(t, redistest.Addr(t))
	cut = gametest.StartOn(t, proxy.Addr(), func(c *game.Config) { c.KeyPrefix, c.SigningKeys = direct.Config.KeyPrefix, keyOne })
	return direct, cut, proxy, outageGame(t, direct)
}

// TestAnOutageIsNotChargedToTheSideToMove: Redis is out of reach for
// longer than Red has left (3 s, plus the lag grace). Red's move, sent
// again once Redis is back, is accepted, charged only the time outside the
// outage; the excuse is committed with the move, before it.
func TestAnOutageIsNotChargedToTheSideToMove(t *testing.T) {
	_, cut, proxy, tb := cutOff(t)
	before := tb.get(t).GetVersion()

	proxy.Cut()
	time.Sleep(5 * time.Second)
	proxy.Restore()

	onCut := &table{env: cut, id: tb.id, seats: tb.seats}
	resp := onCut.move(t, "h1g3")
	g := resp.GetGame()
	if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		t.Fatalf("after the outage Red's move left the game %v (%v), want it ongoing", g.GetStatus(), g.GetResult())
	}
	if left := g.GetClocks().GetFirst().GetMainLeft().AsDuration(); left < 1500*time.Millisecond {
		t.Errorf("Red has %v left after the outage and the move, want most of its 3 s", left)
	}
	evs := eventsAfter(t, tb, before)
	v := wantExcused(t, evs, 4*time.Second)
	if v != before+1 || evs[1].GetMovePlayed() == nil {
		t.Fatalf("events after the outage: %v; want the excuse, then the move", evs)
	}
}

// TestADeadlineDuringAnOutageMovesLater: Redis stops answering for longer
// than Red has left, and nobody moves. The wake-up that fell in the outage
// excuses the turn and indexes a later one; that one ends the game on
// time, no sooner.
func TestADeadlineDuringAnOutageMovesLater(t *testing.T) {
	ctx := context.Background()
	direct, cut, proxy, tb := cutOff(t)
	idx, err := deadline.New(direct.Redis, direct.Config.KeyPrefix, direct.Config.DeadlineShards)
	if err != nil {
		t.Fatal(err)
	}
	before := tb.get(t).GetVersion()
	wake := func() deadline.Entry {
		t.Helper()
		e, ok, err := idx.Next(ctx, idx.ShardOf(tb.id))
		if err != nil || !ok {
			t.Fatalf("the game's wake-up: %v, %v", ok, err)
		}
		return e
	}
	expire := func(e deadline.Entry) *gamev1.ExpireDeadlineResponse {
		t.Helper()
		var resp *gamev1.ExpireDeadlineResponse
		retrying(t, "ExpireDeadline", func() (err error) {
			resp, err = cut.Client.ExpireDeadline(ctx, &gamev1.ExpireDeadlineRequest{GameId: tb.id, DeadlineUnixMs: e.At.UnixMilli()})
			return err
		})
		return resp
	}
	due := wake()

	proxy.Blackhole()
	time.Sleep(6 * time.Second)
	proxy.Restore()

	if time.Now().Before(due.At) {
		t.Fatalf("the wake-up %v is still to come: the outage was too short to test", due.At)
	}
	resp := expire(due)
	if !resp.GetApplied() || !resp.GetExcused() || resp.GetGame().GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		t.Fatalf("the wake-up due in the outage: applied %v, excused %v, game %v (%v); want the turn excused and the game on",
			resp.GetApplied(), resp.GetExcused(), resp.GetGame().GetStatus(), resp.GetGame().GetResult())
	}
	wantExcused(t, eventsAfter(t, tb, before), 4*time.Second)
	later := wake()
	if !later.At.After(due.At.Add(4 * time.Second)) {
		t.Fatalf("the next wake-up is at %v, want over 4 s after %v", later.At, due.At)
	}
	if again := expire(due); again.GetApplied() {
		t.Fatal("the replaced wake-up applied again")
	}
	time.Sleep(time.Until(later.At) + 50*time.Millisecond)
	if end := expire(later); !end.GetApplied() || end.GetExcused() || end.GetGame().GetResult().GetMethod() != commonv1.EndMethod_END_METHOD_TIMEOUT {
		t.Fatalf("the moved wake-up: applied %v, excused %v, result %v; want the game over on time", end.GetApplied(), end.GetExcused(), end.GetGame().GetResult())
	}
}

// TestTheGamesInPlayAreExcusedOnceRedisIsBack: a process that plays a game
// excuses its running turn as soon as Redis answers again, with nobody
// calling, so that the players' apps show the time given back.
func TestTheGamesInPlayAreExcusedOnceRedisIsBack(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	env := gametest.StartOn(t, proxy.Addr(), nil)
	tb := outageGame(t, env)
	before := tb.get(t).GetVersion()

	proxy.Cut()
	time.Sleep(2 * time.Second)
	proxy.Restore()

	deadline := time.Now().Add(5 * time.Second)
	for tb.get(t).GetVersion() == before {
		if time.Now().After(deadline) {
			t.Fatal("no excuse committed 5 s after Redis came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	evs := eventsAfter(t, tb, before)
	wantExcused(t, evs, 1500*time.Millisecond)
	if g := tb.get(t); g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING || g.GetClocks().GetFirst().GetMainLeft().AsDuration() < 2*time.Second {
		t.Fatalf("after the excuse: %v, Red's clock %v; want the game on and most of Red's 3 s left", g.GetStatus(), g.GetClocks().GetFirst())
	}
}

// moveAfter sends Red's move until Redis answers, and wants it accepted
// with the game going on.
func moveAfter(t *testing.T, tb *table, what string) {
	t.Helper()
	req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h1g3"}}
	var resp *gamev1.MakeMoveResponse
	retrying(t, "Red's move "+what, func() (err error) {
		resp, err = tb.env.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), req)
		return err
	})
	if g := resp.GetGame(); g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		t.Fatalf("Red's move %s left the game %v (%v), want it ongoing", what, g.GetStatus(), g.GetResult())
	}
}

// TestAStalledRedisIsAnOutage: Redis stops answering (SIGSTOP) for 2.5 s,
// less than its client's read timeout, after Red spent 1 s of its 3 s. A ping unanswered for a second counts as an outage,
// so Red's move once Redis is back is excused the stall.
func TestAStalledRedisIsAnOutage(t *testing.T) {
	srv := redistest.Own(t)
	env := gametest.StartOn(t, srv.Addr, nil)
	tb := outageGame(t, env)
	time.Sleep(time.Second)
	srv.Pause(t)
	time.Sleep(2500 * time.Millisecond)
	srv.Resume(t)
	moveAfter(t, tb, "after a 2.5 s stall")
}

// commitHold holds on a proxy the commit scripts of one game, and lets
// every other command of the process through, pings included: a commit
// held by Redis, or by a pause of the process between its judgment and
// its write, while Redis serves.
type commitHold struct {
	proxy        *redistest.Proxy
	commit       func(held []byte) bool
	stop, passed chan struct{}
	ended        bool
}

func holdCommits(t *testing.T, proxy *redistest.Proxy, id string) *commitHold {
	t.Helper()
	return holdScripts(t, proxy, []byte("evalsha"), id)
}

// holdScripts is holdCommits for the scripts whose call holds mark (a
// script's hash: only that script) on game id.
func holdScripts(t *testing.T, proxy *redistest.Proxy, mark []byte, id string) *commitHold {
	t.Helper()
	h := &commitHold{proxy: proxy, stop: make(chan struct{}), passed: make(chan struct{})}
	h.commit = func(held []byte) bool {
		held = bytes.ToLower(held)
		return bytes.Contains(held, mark) && bytes.Contains(held, []byte(strings.ToLower(id)))
	}
	proxy.Hold()
	go func() {
		defer close(h.passed)
		for {
			select {
			case <-h.stop:
				return
			case <-time.After(time.Millisecond):
				proxy.Pass(func(held []byte) bool { return !h.commit(held) })
			}
		}
	}()
	return h
}

// wait waits up to 5 s for a commit to be held.
func (h *commitHold) wait(t *testing.T, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !h.proxy.Holds(h.commit); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s was never held", what)
		}
	}
}

// pass lets the commits held so far through.
func (h *commitHold) pass() { h.proxy.Pass(h.commit) }

// end lets everything through from now on.
func (h *commitHold) end() {
	if h.ended {
		return
	}
	h.ended = true
	close(h.stop)
	<-h.passed
	h.proxy.Restore()
}

// TestACommitHeldPastTheReachTimeoutIsNotChargedToTheTurnItBegins:
// process a judges Red's move at T and its commit reaches Redis only 2 s
// later (a process paused between judging and committing, or Redis holding
// the write; here the commit alone is held on the wire while every other
// command of a, its pings included, gets through). Black's turn began at T,
// before anyone could see the move: the hold is an outage of writes, which
// Black is excused at once, instead of being charged two seconds it could
// not use (past its time left, the sweeper would flag Black for a move
// Black never saw).
func TestACommitHeldPastTheReachTimeoutIsNotChargedToTheTurnItBegins(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	a := gametest.StartOn(t, proxy.Addr(), func(c *game.Config) { c.SigningKeys = keyOne })
	b := gametest.Start(t, func(c *game.Config) { c.KeyPrefix = a.Config.KeyPrefix; c.SigningKeys = keyOne })
	const main = time.Minute
	clocked := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(main)}}}
	tb := create(t, a, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: clocked, Public: true})
	tb.move(t, "h3e3")
	before := tb.move(t, "h10g8").GetGame().GetVersion() // both first moves made: Red's clock runs
	hold := holdCommits(t, proxy, tb.id)
	defer hold.end()
	done := make(chan error, 1)
	go func() {
		_, err := a.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{
			GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "c4c5"}})
		done <- err
	}()
	hold.wait(t, "the move's commit")
	const delay = 2 * time.Second // within go-redis' 3 s read timeout
	time.Sleep(delay)
	hold.end()
	if err := <-done; err != nil {
		t.Fatalf("the move: %v", err)
	}
	// Given back at once, as an outage is: nobody need act.
	var left time.Duration
	for until := time.Now().Add(5 * time.Second); time.Now().Before(until); time.Sleep(50 * time.Millisecond) {
		g, err := b.Client.GetGame(context.Background(), &gamev1.GetGameRequest{GameId: tb.id})
		if err != nil {
			t.Fatal(err)
		}
		cl := g.GetGame().GetClocks()
		if cl.GetRunning() != commonv1.Side_SIDE_SECOND {
			t.Fatalf("running %v, want the second side's clock", cl.GetRunning())
		}
		if left = cl.GetSecond().GetMainLeft().AsDuration(); left >= main-500*time.Millisecond {
			break
		}
	}
	if left < main-500*time.Millisecond {
		t.Fatalf("Black's clock shows %v left 5 s after the move became visible, want about %v: charged %v for a move that was not yet stored",
			left, main, main-left)
	}
	// The move, then Black's turn excused the hold: apps see the time
	// given back, and Red's clock stopped when the move was judged.
	evs := eventsAfter(t, tb, before)
	if len(evs) < 2 || evs[0].GetMovePlayed().GetMove().GetCoordinate() != "c4c5" {
		t.Fatalf("events after version %d: %v; want the move first", before, evs)
	}
	c := evs[1].GetClock()
	if c.GetKind() != gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED || c.GetSide() != commonv1.Side_SIDE_SECOND || c.GetExcused().AsDuration() < delay-250*time.Millisecond {
		t.Fatalf("after the move: %v; want Black's turn excused about %v", evs[1], delay)
	}
	if red := c.GetClocks().GetFirst().GetMainLeft().AsDuration(); red < main-delay/2 {
		t.Fatalf("Red's clock shows %v left: charged the hold of its own move", red)
	}
}

// TestTheSweeperDoesNotFlagTheTurnAHeldCommitBegan: Red's move is held
// 2 s between its judgment and its commit (as in
// TestACommitHeldPastTheReachTimeoutIsNotChargedToTheTurnItBegins), and
// Black has 0.5 s left. The move lands with Black's deadline behind it,
// and process a's excuse is still on its way (as Redis holding a's
// writes would keep it) when the deadline sweeper asks process b. b
// excuses the hold the commit recorded, instead of ending the game: Black
// never loses on time for a move Black could not see.
func TestTheSweeperDoesNotFlagTheTurnAHeldCommitBegan(t *testing.T) {
	b, tb, hold, done := holdRedsMove(t, 500*time.Millisecond)
	defer hold.end()
	sweepWhileHeld(t, b, tb, storedWake(t, b, tb.id), hold, done, "a move held 2 s")
}

// holdRedsMove starts process a, whose Redis commands pass through a proxy,
// and process b on a game with a clock of 2 s, played until Black has about
// left. Then Red's move is judged on a and its commit held 2 s before it
// lands, with the hold recorded; a's excuse of the hold is held in turn
// until hold ends. tb is the game as b serves it; done brings the move's
// answer.
func holdRedsMove(t *testing.T, left time.Duration) (b *gametest.Env, tb *table, hold *commitHold, done <-chan error) {
	t.Helper()
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	noLag := func(c *game.Config) { c.SigningKeys = keyOne; c.LagMaxPerMove = 0 }
	a := gametest.StartOn(t, proxy.Addr(), noLag)
	b = gametest.Start(t, func(c *game.Config) { noLag(c); c.KeyPrefix = a.Config.KeyPrefix })
	const main = 2 * time.Second
	clocked := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(main)}}}
	onA := create(t, a, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: clocked, Public: true})
	onA.move(t, "h3e3")
	onA.move(t, "h10g8") // both first moves made: Red's clock runs
	onA.move(t, "c4c5")
	time.Sleep(main - left)
	onA.move(t, "b10c8") // Black has about left
	hold = holdCommits(t, proxy, onA.id)
	t.Cleanup(hold.end)
	moved := make(chan error, 1)
	go func() {
		_, err := a.Client.MakeMove(onA.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{
			GameId: onA.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "b1c3"}})
		moved <- err
	}()
	hold.wait(t, "the move's commit")
	time.Sleep(2 * time.Second)
	hold.pass() // the move lands, 2 s after its judgment, its hold recorded
	hold.wait(t, "the excuse's commit")
	return b, &table{env: b, id: onA.id, seats: onA.seats}, hold, moved
}

// sweepWhileHeld has process b, as the deadline sweeper would, expire
// tb's wake-up at wake while the other process's excuse is still held,
// then lets everything through, waits for the held move (done), and
// wants the game going on: Black never loses on time for a move Black
// could not see (what says how it was held).
func sweepWhileHeld(t *testing.T, b *gametest.Env, tb *table, wake int64, hold *commitHold, done <-chan error, what string) {
	t.Helper()
	exp, err := b.Client.ExpireDeadline(context.Background(), &gamev1.ExpireDeadlineRequest{GameId: tb.id, DeadlineUnixMs: wake})
	hold.end()
	moveErr := <-done
	if err != nil {
		t.Fatalf("ExpireDeadline: %v", err)
	}
	if g := tb.get(t); g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		t.Fatalf("the sweeper, before the excuse of %s, ended the game: %v %v (ExpireDeadline applied %v; the move: %v); "+
			"Black lost on time for a move it could not see", what, g.GetStatus(), g.GetResult(), exp.GetApplied(), moveErr)
	}
	if moveErr != nil {
		t.Fatalf("the held move: %v", moveErr)
	}
}

// TestALaterOutageInAHeldTurnIsExcusedToo: Red's move is held 3 s (the
// pings get through), so Black's turn, begun at the judgment, is excused
// 3 s. Later in that same turn Redis is cut for 2 s, an outage the pings
// see. The hold and the outage are two spans in which Black could not
// move: Black is excused both, not the longer alone.
func TestALaterOutageInAHeldTurnIsExcusedToo(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	a := gametest.StartOn(t, proxy.Addr(), func(c *game.Config) { c.LagMaxPerMove = 0 })
	const main = time.Minute
	clocked := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(main)}}}
	tb := create(t, a, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: clocked, Public: true})
	tb.move(t, "h3e3")
	tb.move(t, "h10g8") // Red's clock runs

	hold := holdCommits(t, proxy, tb.id)
	defer hold.end()
	done := make(chan error, 1)
	judged := time.Now()
	go func() {
		_, err := a.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{
			GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "c4c5"}})
		done <- err
	}()
	hold.wait(t, "the move's commit")
	const held = 3 * time.Second
	time.Sleep(held)
	hold.end()
	if err := <-done; err != nil {
		t.Fatalf("the move: %v", err)
	}
	time.Sleep(500 * time.Millisecond)

	// An outage the pings see, later in Black's turn.
	const outage = 2 * time.Second
	proxy.Cut()
	time.Sleep(outage)
	proxy.Restore()
	time.Sleep(1500 * time.Millisecond)

	var resp *gamev1.MakeMoveResponse
	retrying(t, "Black's move", func() (err error) {
		resp, err = a.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.MakeMoveRequest{
			GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "b10c8"}})
		return err
	})
	wall := time.Since(judged)
	charged := main - resp.GetGame().GetClocks().GetSecond().GetMainLeft().AsDuration()
	owed := wall - held - outage
	if charged > owed+time.Second {
		t.Fatalf("Black's turn lasted %v, of which %v the move was held and %v Redis was cut: charged %v, want about %v (%v too much)",
			wall.Round(time.Millisecond), held, outage, charged.Round(time.Millisecond), owed.Round(time.Millisecond), (charged - owed).Round(time.Millisecond))
	}
}

// TestARedisThatRefusesWritesIsAnOutage: Redis answers reads and pings
// but refuses writes, or holds them, for longer than Red has left (3 s):
// full, a replica (a primary demoted in a failover), short of the replicas
// it must write to, or pausing writes. Nobody calls meanwhile, so no command's failure tells of it.
// Red's move once Redis takes writes again is taken, the refusal excused.
func TestARedisThatRefusesWritesIsAnOutage(t *testing.T) {
	srv := redistest.Own(t, "--maxmemory-policy", "noeviction")
	env := gametest.StartOn(t, srv.Addr, nil)
	rdb := srv.Client(t)
	do := func(args []any) {
		t.Helper()
		if err := rdb.Do(context.Background(), args...).Err(); err != nil {
			t.Fatal(args, err)
		}
	}
	for _, c := range []struct {
		name             string
		refuse, takeBack []any
		excused          time.Duration
	}{
		{"full", []any{"config", "set", "maxmemory", "1"}, []any{"config", "set", "maxmemory", "0"}, 4 * time.Second},
		{"a replica", []any{"replicaof", "127.0.0.1", "1"}, []any{"replicaof", "no", "one"}, 4 * time.Second},
		{"short of replicas", []any{"config", "set", "min-replicas-to-write", "1"}, []any{"config", "set", "min-replicas-to-write", "0"}, 4 * time.Second},
		// As a failover does (FAILOVER, CLUSTER FAILOVER): the writes wait.
		// Straight after the refusal above, the ping under way is one the
		// Redis client retries after a refusal, which meets the pause
		// after a write was taken: it says nothing, and the next ping, a
		// second later, dates the outage.
		{"writes paused", []any{"client", "pause", "60000", "write"}, []any{"client", "unpause"}, 3 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb := outageGame(t, env)
			before := tb.get(t).GetVersion()
			do(c.refuse)
			time.Sleep(4500 * time.Millisecond)
			do(c.takeBack)
			moveAfter(t, tb, "once Redis takes writes again")
			wantExcused(t, eventsAfter(t, tb, before), c.excused)
		})
	}
}

// TestAnOutageIsNotChargedToTheWaits: Redis is out of reach for longer
// than Han has to choose a formation, then than Cho has to make the first
// move (2 s each). Han's choice and Cho's move, sent again once Redis is
// back, are taken: no default formation, no abort. Each excuse is
// committed with the command, before it.
func TestAnOutageIsNotChargedToTheWaits(t *testing.T) {
	direct := gametest.Start(t, func(c *game.Config) { c.SigningKeys = keyOne })
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	cut := gametest.StartOn(t, proxy.Addr(), func(c *game.Config) { c.KeyPrefix, c.SigningKeys = direct.Config.KeyPrefix, keyOne })
	minute := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(time.Minute)}}}
	tb := create(t, direct, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_JANGGI, TimeControl: minute,
		SetupTime: durationpb.New(2 * time.Second), FirstMoveTime: durationpb.New(2 * time.Second)})
	onCut := &table{env: cut, id: tb.id, seats: tb.seats}
	outage := func() int64 {
		before := tb.get(t).GetVersion()
		proxy.Cut()
		time.Sleep(4 * time.Second)
		proxy.Restore()
		return int64(before)
	}
	// excused is the first of evs but a seat's connection (a stream of the
	// last check letting go), which must excuse side's wait; the event after
	// it is then evs[1].
	excused := func(evs []*gamev1.Event, side commonv1.Side) ([]*gamev1.Event, *gamev1.ClockEvent) {
		t.Helper()
		for len(evs) > 0 && evs[0].GetPlayerConnection() != nil {
			evs = evs[1:]
		}
		if len(evs) < 2 {
			t.Fatalf("events after the outage: %v; want an excuse and a command", evs)
		}
		c := evs[0].GetClock()
		if c.GetKind() != gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED || c.GetSide() != side || c.GetExcused().AsDuration() < 3*time.Second {
			t.Fatalf("events after the outage: %v; want first %v excused at least 3s", evs, side)
		}
		return evs, c
	}

	before := outage()
	req := &gamev1.ChooseFormationRequest{GameId: tb.id, RequestId: rid(), Formation: commonv1.Formation_FORMATION_SANG_MA_SANG_MA}
	var chosen *gamev1.ChooseFormationResponse
	retrying(t, "Han's choice after the outage", func() (err error) {
		chosen, err = cut.Client.ChooseFormation(onCut.as(commonv1.Side_SIDE_SECOND), req)
		return err
	})
	if g := chosen.GetGame(); g.GetSecondFormation() != commonv1.Formation_FORMATION_SANG_MA_SANG_MA || g.GetStatus() != commonv1.GameStatus_GAME_STATUS_SETUP {
		t.Fatalf("after Han's choice: %v, Han's formation %v; want Han's own, and Cho to choose", g.GetStatus(), g.GetSecondFormation())
	}
	evs := eventsAfter(t, tb, uint64(before))
	evs, c := excused(evs, commonv1.Side_SIDE_SECOND)
	if c.GetSetupDeadline() == nil || evs[1].GetFormationChosen().GetByDefault() {
		t.Fatalf("events after the outage: %v; want the setup deadline moved, then Han's choice", evs)
	}

	retrying(t, "Cho's choice", func() error {
		_, err := direct.Client.ChooseFormation(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.ChooseFormationRequest{
			GameId: tb.id, RequestId: rid(), Formation: commonv1.Formation_FORMATION_MA_SANG_SANG_MA})
		return err
	})
	first := tb.get(t).GetLegalMoves()[0].GetCoordinate()
	before = outage()
	mv := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: first}}
	var moved *gamev1.MakeMoveResponse
	retrying(t, "Cho's first move after the outage", func() (err error) {
		moved, err = cut.Client.MakeMove(onCut.as(commonv1.Side_SIDE_FIRST), mv)
		return err
	})
	if g := moved.GetGame(); g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		t.Fatalf("Cho's first move after the outage left the game %v (%v), want it ongoing", g.GetStatus(), g.GetResult())
	}
	evs = eventsAfter(t, tb, uint64(before))
	evs, c = excused(evs, commonv1.Side_SIDE_FIRST)
	if c.GetClocks().GetFirstMoveDeadline() == nil || evs[1].GetMovePlayed() == nil {
		t.Fatalf("events after the outage: %v; want the first-move deadline moved, then Cho's move", evs)
	}
}

// TestACommandHeldByAStalledRedisEndsNoOutageEarly: Red moves from the
// process's cached state while Redis is stalled, so its commit waits out
// the stall, 5 s, longer than Black's 3 s. Black's turn began with Red's
// move, in the stall: Black's move once Redis is back is excused the
// stall, not refused as out of time. The outage ends when Redis answered
// the commit, not when Red's move was judged. Redis answers the commit
// alone, before any ping that could end the outage: the pings sent in
// the stall fail.
func TestACommandHeldByAStalledRedisEndsNoOutageEarly(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	env := gametest.StartOn(t, proxy.Addr(), nil)
	tb := outageGame(t, env)
	tb.get(t) // the game is cached: Red's move needs no read
	// Red's move is judged before the next ping finds Redis gone.
	proxy.Hold()
	defer proxy.Restore()
	var red *gamev1.MakeMoveResponse
	redErr := make(chan error, 1)
	go func() {
		var err error
		red, err = env.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h1g3"}})
		redErr <- err
	}()
	time.Sleep(5 * time.Second)
	proxy.Release(func(held []byte) bool { return bytes.Contains(held, []byte(tb.id)) })
	if err := <-redErr; err != nil {
		t.Fatalf("Red's move held by the stall: %v", err)
	}
	before := red.GetGame().GetVersion()
	req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "b10c8"}}
	var resp *gamev1.MakeMoveResponse
	retrying(t, "Black's move after the stall", func() (err error) {
		resp, err = env.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), req)
		return err
	})
	if g := resp.GetGame(); g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING || g.GetClocks().GetSecond().GetMainLeft().AsDuration() < 2*time.Second {
		t.Fatalf("Black's move after the stall left the game %v (%v), Black's clock %v; want it ongoing, most of Black's 3 s left",
			g.GetStatus(), g.GetResult(), g.GetClocks().GetSecond())
	}
	for _, e := range eventsAfter(t, tb, before) {
		if c := e.GetClock(); c.GetKind() == gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED && c.GetSide() == commonv1.Side_SIDE_SECOND {
			if c.GetExcused().AsDuration() < 4*time.Second {
				t.Fatalf("Black excused %v of a 5 s stall", c.GetExcused().AsDuration())
			}
			return
		}
	}
	t.Fatal("no OUTAGE_EXCUSED event for Black")
}

// TestAProcessDropsItsCacheWhenRedisLosesItsData: Redis loses the
// service's data (restarted without persistence; here its keys are
// deleted). The process that played a game, and cached it, finds its
// beat gone and drops its cache: a stream of the game is NotFound, as a
// read is, not served at version 0 from the cache.
func TestAProcessDropsItsCacheWhenRedisLosesItsData(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := xiangqi(t, env)
	tb.move(t, "h3e3")
	ctx := context.Background()
	keys := env.Redis.Keys(ctx, env.Config.KeyPrefix+"*").Val()
	if len(keys) == 0 {
		t.Fatal("no keys to lose")
	}
	if err := env.Redis.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // a beat or more
	sctx, cancel := context.WithTimeout(tb.as(commonv1.Side_SIDE_FIRST), 5*time.Second)
	defer cancel()
	st, err := env.Client.StreamEvents(sctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: 3})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Fatalf("a stream of a game Redis lost: %v, want NotFound", err)
	}
}

// TestEveryProcessDropsItsCacheWhenRedisLosesItsData: as above, with two
// processes, each caching a game it played. Only one of them finds no
// beat at all (the other finds the one it wrote since), yet both must
// drop their caches: a stream on either of a game Redis lost is
// NotFound, not a live stream of a game that no longer exists.
func TestEveryProcessDropsItsCacheWhenRedisLosesItsData(t *testing.T) {
	a := gametest.Start(t, func(c *game.Config) { c.SigningKeys = keyOne })
	b := gametest.Start(t, func(c *game.Config) { c.KeyPrefix, c.SigningKeys = a.Config.KeyPrefix, keyOne })
	tables := []*table{xiangqi(t, a), xiangqi(t, b)}
	for _, tb := range tables {
		tb.move(t, "h3e3")
	}
	time.Sleep(1500 * time.Millisecond) // both have beaten
	ctx := context.Background()
	keys := a.Redis.Keys(ctx, a.Config.KeyPrefix+"*").Val()
	if len(keys) == 0 {
		t.Fatal("no keys to lose")
	}
	if err := a.Redis.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // two beats or more
	for i, tb := range tables {
		sctx, cancel := context.WithTimeout(tb.as(commonv1.Side_SIDE_FIRST), 5*time.Second)
		st, err := tb.env.Client.StreamEvents(sctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: 3})
		var m *gamev1.StreamEventsResponse
		if err == nil {
			m, err = st.Recv()
		}
		cancel()
		if status.Code(err) != codes.NotFound {
			t.Fatalf("process %d: a stream of a game Redis lost: %v, %v; want NotFound", i+1, m, err)
		}
	}
}

// silenceThen plays Red's move on a second process, started after, in the
// game an earlier one left with Red to move (outageGame), wants the game
// to go on, and returns the events after before.
func silenceThen(t *testing.T, first *gametest.Env, tb *table, before uint64) []*gamev1.Event {
	t.Helper()
	later := gametest.Start(t, func(c *game.Config) { c.KeyPrefix, c.SigningKeys = first.Config.KeyPrefix, keyOne })
	on := &table{env: later, id: tb.id, seats: tb.seats}
	if g := on.move(t, "h1g3").GetGame(); g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		t.Fatalf("after the silence Red's move left the game %v (%v), want it ongoing", g.GetStatus(), g.GetResult())
	}
	return eventsAfter(t, on, before)
}

// TestATimeNoGameProcessRanIsNotCharged: the only process is cut off from
// Redis for good (as if killed) with Red to move, and another starts 5 s
// later, longer than Red has left. Nobody could move from the end of the
// first one's lease until then: Red's move is accepted, excused that.
func TestATimeNoGameProcessRanIsNotCharged(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	first := gametest.StartOn(t, proxy.Addr(), func(c *game.Config) {
		c.SigningKeys, c.PresenceLease = keyOne, 600*time.Millisecond
	})
	tb := outageGame(t, first)
	before := tb.get(t).GetVersion()
	proxy.Cut()
	defer proxy.Restore()
	time.Sleep(5 * time.Second)

	evs := silenceThen(t, first, tb, before)
	if v := wantExcused(t, evs, 3500*time.Millisecond); v != before+1 || evs[1].GetMovePlayed() == nil {
		t.Fatalf("events after the silence: %v; want the excuse, then the move", evs)
	}
}

// TestATimeAfterTheLastProcessStoppedIsNotCharged: the only process stops
// cleanly with Red to move, and another starts 5 s later: the silence
// begins at the stop.
func TestATimeAfterTheLastProcessStoppedIsNotCharged(t *testing.T) {
	first := gametest.Start(t, func(c *game.Config) { c.SigningKeys = keyOne })
	tb := outageGame(t, first)
	before := tb.get(t).GetVersion()
	first.Stop()
	time.Sleep(5 * time.Second)

	evs := silenceThen(t, first, tb, before)
	wantExcused(t, evs, 4500*time.Millisecond)
}

// TestAProcessStartingBesideALiveOneExcusesNothing: as in a rollout, one
// process stops cleanly and another starts 4.5 s later, while a third
// served all along. That is no silence: Red, who had 3 s, loses on time.
func TestAProcessStartingBesideALiveOneExcusesNothing(t *testing.T) {
	serving := gametest.Start(t, func(c *game.Config) { c.SigningKeys = keyOne })
	tb := outageGame(t, serving)
	before := tb.get(t).GetVersion()
	stopping := gametest.Start(t, func(c *game.Config) { c.KeyPrefix, c.SigningKeys = serving.Config.KeyPrefix, keyOne })
	stopping.Stop()
	time.Sleep(4500 * time.Millisecond)

	later := gametest.Start(t, func(c *game.Config) { c.KeyPrefix, c.SigningKeys = serving.Config.KeyPrefix, keyOne })
	on := &table{env: later, id: tb.id, seats: tb.seats}
	_, err := later.Client.MakeMove(on.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h1g3"}})
	wantCode(t, err, codes.FailedPrecondition)
	if r := on.get(t).GetResult(); r.GetMethod() != commonv1.EndMethod_END_METHOD_TIMEOUT {
		t.Fatalf("Red's move 4.5 s into a 3 s turn left %v, want a loss on time", r)
	}
	for _, e := range eventsAfter(t, on, before) {
		if e.GetClock().GetKind() == gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED {
			t.Fatalf("an excuse while a process served: %v", e)
		}
	}
}

// TestAnOutageAfterTheTimeRanOutExcusesNothing: Red's 3 s (and the lag
// grace) ran out before Redis went out of reach. The outage saved
// nothing: Red's move after it loses on time, with no excuse among the
// events.
func TestAnOutageAfterTheTimeRanOutExcusesNothing(t *testing.T) {
	_, cut, proxy, tb := cutOff(t)
	before := tb.get(t).GetVersion()
	time.Sleep(4500 * time.Millisecond)
	proxy.Cut()
	time.Sleep(3 * time.Second)
	proxy.Restore()

	onCut := &table{env: cut, id: tb.id, seats: tb.seats}
	var err error
	retrying(t, "Red's late move", func() error {
		_, err = cut.Client.MakeMove(onCut.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: "late", Move: &commonv1.Move{Coordinate: "h1g3"}})
		if status.Code(err) == codes.FailedPrecondition {
			return nil
		}
		return err
	})
	if r := onCut.get(t).GetResult(); r.GetMethod() != commonv1.EndMethod_END_METHOD_TIMEOUT {
		t.Fatalf("Red's move after the outage left %v, want a loss on time", r)
	}
	for _, e := range eventsAfter(t, onCut, before) {
		if e.GetClock().GetKind() == gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED {
			t.Fatalf("an outage that began after Red's time ran out was excused: %v", e)
		}
	}
}

// TestAStopWithRedisStalledEndsInTime: a game process stops while Redis
// answers nothing (SIGSTOP), with a seat connected, so its close has a
// disconnection to announce and a lease to give up, each a write that
// waits on Redis. The close gets 5 s, and is then left unfinished as a
// crash would leave it: the stop took 45 s before, past the grace a pod
// is given.
func TestAStopWithRedisStalledEndsInTime(t *testing.T) {
	srv := redistest.Own(t)
	env := gametest.StartOn(t, srv.Addr, nil)
	tb := outageGame(t, env)
	ctx, cancel := context.WithCancel(tb.as(commonv1.Side_SIDE_FIRST))
	defer cancel()
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	// Red's connecting is announced after the snapshot: the seat is held.
	for connected := false; !connected; {
		m, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		connected = m.GetEvent().GetPlayerConnection().GetConnected()
	}

	srv.Pause(t)
	defer srv.Resume(t)
	start := time.Now()
	env.Stop()
	// The drain (no call runs but the stream, which the stop ends) and the
	// 5 s of the close, with room for a busy machine.
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("the stop took %v with Redis stalled", took)
	}
}

// TestReadsShowTheHoldOfAHeldCommitExcused: Red's move is held 2 s
// between its judgment and its commit, which records the hold, and process
// a's excuse of it is held in turn (a stalled or killed process). Reads on
// process b meanwhile (GetGame, the snapshot of StreamEvents, so
// ClockService.GetClocks too) show the clocks the game is judged on: Black's
// deadline as the sweeper's judgment then sets it, the hold excused, not 2 s
// short of it.
func TestReadsShowTheHoldOfAHeldCommitExcused(t *testing.T) {
	b, onB, hold, done := holdRedsMove(t, 1500*time.Millisecond) // the reads below have 1.5 s before Black's excused deadline
	defer hold.end()
	visible := time.Now()
	wake := storedWake(t, b, onB.id) // the turn's wake-up, its hold not excused
	read := onB.get(t)
	if read.GetClocks().GetRunning() != commonv1.Side_SIDE_SECOND {
		t.Fatalf("running %v, want Black's clock (the held move is on Redis)", read.GetClocks().GetRunning())
	}
	readLeft := read.GetClocks().GetSecond().GetMainLeft().AsDuration()
	readDeadline := read.GetClocks().GetDeadline().AsTime()
	snap := snapshotOn(t, onB)
	snapDeadline := snap.GetClocks().GetDeadline().AsTime()

	// The sweeper asks b about the (unexcused) wake-up, which is due.
	time.Sleep(time.Until(time.UnixMilli(wake)) + 20*time.Millisecond)
	exp, err := b.Client.ExpireDeadline(context.Background(), &gamev1.ExpireDeadlineRequest{GameId: onB.id, DeadlineUnixMs: wake})
	if err != nil {
		t.Fatalf("ExpireDeadline: %v", err)
	}
	after := onB.get(t)
	hold.end()
	<-done
	if after.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		t.Fatalf("the sweeper flagged Black: %v %v", after.GetStatus(), after.GetResult())
	}
	judgedDeadline := after.GetClocks().GetDeadline().AsTime()
	t.Logf("move visible at %v; GetGame on b showed Black %v left, deadline %v (snapshot %v); the sweeper's judgment (applied %v, excused %v) then gave deadline %v",
		visible.Format("15:04:05.000"), readLeft, readDeadline.Format("15:04:05.000"), snapDeadline.Format("15:04:05.000"),
		exp.GetApplied(), exp.GetExcused(), judgedDeadline.Format("15:04:05.000"))
	if d := judgedDeadline.Sub(readDeadline); d > 500*time.Millisecond {
		t.Errorf("GetGame on b, with the hold already recorded in Redis, showed Black's deadline at %v (%v left, deadline %v before the move was even visible); "+
			"the sweeper's judgment of the same turn, with nothing new, puts it at %v: the clock shown was %v wrong",
			readDeadline.Format("15:04:05.000"), readLeft, visible.Sub(readDeadline).Round(time.Millisecond), judgedDeadline.Format("15:04:05.000"), d.Round(time.Millisecond))
	}
	if d := judgedDeadline.Sub(snapDeadline); d > 500*time.Millisecond {
		t.Errorf("the StreamEvents snapshot on b showed Black's deadline %v before the one the game is judged on", d.Round(time.Millisecond))
	}
}

// snapshotOn reads the snapshot a spectator's stream opens with (a seat's
// would record its player connected, a commit).
func snapshotOn(t *testing.T, tb *table) *gamev1.Game {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := tb.env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		if s := m.GetSnapshot(); s != nil {
			return s
		}
	}
}

// TestACrashOfTheOnlyProcessIsChargedABeatsGraceAtMost: the only game
// process dies (cut off from Redis for good, as a SIGKILL or a node crash
// leaves it) with Red to move and 3 s left, and another starts 5 s later,
// with the default presence lease (15 s), as deployments run. The silence
// was dated from the end of the dead process's lease, so a crash and
// restart within it were charged whole to the player to move, who lost on
// time while no server ran. It is dated from a grace after the dead
// process's last beat: Red's move is accepted, most of the dead time
// excused.
func TestACrashOfTheOnlyProcessIsChargedABeatsGraceAtMost(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	first := gametest.StartOn(t, proxy.Addr(), func(c *game.Config) { c.SigningKeys = keyOne })
	tb := outageGame(t, first)
	before := tb.get(t).GetVersion()
	proxy.Cut()
	defer proxy.Restore()
	time.Sleep(5 * time.Second)

	later := gametest.Start(t, func(c *game.Config) { c.KeyPrefix, c.SigningKeys = first.Config.KeyPrefix, keyOne })
	on := &table{env: later, id: tb.id, seats: tb.seats}
	g := on.get(t)
	if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		t.Fatalf("the only game process crashed for 5 s with Red to move (3 s left); on the new process the game is %v (%v), "+
			"want it ongoing and the dead time excused, as after a clean stop; events: %v", g.GetStatus(), g.GetResult(), eventsAfter(t, on, before))
	}
	resp, err := later.Client.MakeMove(on.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h1g3"}})
	if err != nil || resp.GetGame().GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		t.Fatalf("Red's first move after the crash: %v, game %v (%v); want it accepted, the dead time excused; events: %v",
			err, resp.GetGame().GetStatus(), resp.GetGame().GetResult(), eventsAfter(t, on, before))
	}
	// Red had 3 s; of the 5 s with no process, Red is charged at most the
	// grace after the dead process's last beat (2.5 s).
	wantExcused(t, eventsAfter(t, on, before), 2*time.Second)
}

// TestAKilledProcessBesideOneCutOffIsNotCharged: two game processes,
// default leases (15 s). The one that runs the game is killed (cut off for
// good) with Red to move and 6 s left, while the other is cut off from
// Redis for 8 s; a third starts 1.5 s after that one came back. Nobody
// could move from the kill until the return. The returning process counted
// itself serving until its own lease ran out, so no silence was recorded
// and Red lost on time on the third; it counts itself serving until its
// contact with Redis broke, and the silence is excused.
func TestAKilledProcessBesideOneCutOffIsNotCharged(t *testing.T) {
	killedProxy := redistest.NewProxy(t, redistest.Addr(t))
	killed := gametest.StartOn(t, killedProxy.Addr(), func(c *game.Config) { c.SigningKeys = keyOne })
	blipProxy := redistest.NewProxy(t, redistest.Addr(t))
	gametest.StartOn(t, blipProxy.Addr(), func(c *game.Config) { c.KeyPrefix, c.SigningKeys = killed.Config.KeyPrefix, keyOne })
	tb := outageGameOf(t, killed, 6*time.Second)
	before := tb.get(t).GetVersion()

	blipProxy.Cut()
	killedProxy.Cut()
	defer killedProxy.Restore()
	time.Sleep(8 * time.Second)
	blipProxy.Restore()
	time.Sleep(1500 * time.Millisecond)

	on, resp, err := redMovesOnANewProcess(t, killed, tb)
	if err != nil || resp.GetGame().GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		g := on.get(t)
		t.Fatalf("the game's process was killed with Red to move (6 s left) while the only other was cut off from Redis for 8 s: "+
			"Red's move on a process started 1.5 s after that one came back: %v, game %v (%v); want it accepted, the time no process could serve "+
			"(from 2.5 s after the killed one's last beat until the other found Redis again) excused; events: %v",
			err, g.GetStatus(), g.GetResult(), eventsAfter(t, on, before))
	}
}

// TestALinkThatFlapsIsNotChargedToTheSideToMove: the game's process is
// killed (cut off for good) with Red to move and 9 s left, while the only
// other process, whose lease is renewed only every 20 s, is cut off from
// Redis for 8 s, back for a second, and cut off 2 s more; a third starts
// just after. Nobody could serve through either break. The process told
// a renewal of its latest break only, and only at its next renewal, while
// the third, seeing it beat, recorded nothing: Red lost on time. Each break
// is recorded at once when the contact comes back, and Red's move is
// accepted.
func TestALinkThatFlapsIsNotChargedToTheSideToMove(t *testing.T) {
	killedProxy := redistest.NewProxy(t, redistest.Addr(t))
	killed := gametest.StartOn(t, killedProxy.Addr(), func(c *game.Config) { c.SigningKeys = keyOne })
	flapping := redistest.NewProxy(t, redistest.Addr(t))
	gametest.StartOn(t, flapping.Addr(), func(c *game.Config) {
		c.KeyPrefix, c.SigningKeys, c.PresenceLease = killed.Config.KeyPrefix, keyOne, time.Minute
	})
	tb := outageGameOf(t, killed, 9*time.Second)
	before := tb.get(t).GetVersion()

	killedProxy.Cut()
	defer killedProxy.Restore()
	for _, cut := range []time.Duration{8 * time.Second, 2 * time.Second} {
		flapping.Cut()
		time.Sleep(cut)
		flapping.Restore()
		time.Sleep(time.Second)
	}

	on, resp, err := redMovesOnANewProcess(t, killed, tb)
	if err != nil || resp.GetGame().GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		g := on.get(t)
		t.Fatalf("the game's process was killed with Red to move (9 s left) while the only other was cut off from Redis for 8 s, back 1 s, cut off 2 s: "+
			"Red's move on a process started after: %v, game %v (%v); want it accepted, the breaks excused; events: %v",
			err, g.GetStatus(), g.GetResult(), eventsAfter(t, on, before))
	}
	wantExcused(t, eventsAfter(t, on, before), 4*time.Second)
}

// TestAProcessBeatingSinceRedisLostItsDataIsNoSilence: Redis
// restarts without its data (no persistence). The game process "live"
// reaches it again at once and beats every second; its lease went with
// the data and comes back only at its next renewal (every third of
// --presence-lease: 20 s here, 5 s by default). Meanwhile a game is
// created and played on it, and another process, which renewed its lease
// since the loss, is killed. A process that starts then found only the
// dead one's lease and recorded a silence from it, though "live" beat (and
// served) all along, and Red, whose 4 s ran out while "live" served, was
// excused that. Beats without a lease count: Red loses on time, as in
// TestAProcessStartingBesideALiveOneExcusesNothing.
func TestAProcessBeatingSinceRedisLostItsDataIsNoSilence(t *testing.T) {
	srv := redistest.Own(t, "--appendonly", "no") // a restart loses everything
	live := gametest.StartOn(t, srv.Addr, func(c *game.Config) { c.SigningKeys, c.PresenceLease = keyOne, time.Minute })
	proxy := redistest.NewProxy(t, srv.Addr)
	gametest.StartOn(t, proxy.Addr(), func(c *game.Config) {
		c.KeyPrefix, c.SigningKeys, c.PresenceLease = live.Config.KeyPrefix, keyOne, 600*time.Millisecond
	})
	if err := srv.CrashFor(context.Background(), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // both reach Redis again; the doomed one renews (every 200 ms)

	tb := outageGameOf(t, live, 4*time.Second)
	before := tb.get(t).GetVersion()
	proxy.Cut() // the doomed one dies
	defer proxy.Restore()
	time.Sleep(6 * time.Second)

	later := gametest.StartOn(t, srv.Addr, func(c *game.Config) { c.KeyPrefix, c.SigningKeys = live.Config.KeyPrefix, keyOne })
	on := &table{env: later, id: tb.id, seats: tb.seats}
	_, err := later.Client.MakeMove(on.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h1g3"}})
	for _, e := range eventsAfter(t, on, before) {
		if c := e.GetClock(); c.GetKind() == gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED {
			t.Fatalf("Red was excused %v (move: %v) of a 6 s turn (4 s on the clock) in which a game process beat and served all along "+
				"(its lease lost with Redis' data, not yet renewed); want no excuse, and Red's move refused, lost on time", c.GetExcused().AsDuration(), err)
		}
	}
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Red's move 6 s into a 4 s turn, while a process served: %v, want FailedPrecondition (lost on time)", err)
	}
}

// TestReadsAfterACrashShowTheTimeGivenBack: the only game process dies
// (cut off for good) with Red to move and 5 s left; another starts 8 s
// later and learns the silence at its start. Red's move would be accepted,
// the silence excused; reads showed Red's deadline long past until someone
// acted (a process commits the excuse at once only in the games it has
// cached, and a new one has none). Reads show the game as the process
// would judge it, the time given back.
func TestReadsAfterACrashShowTheTimeGivenBack(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	first := gametest.StartOn(t, proxy.Addr(), func(c *game.Config) { c.SigningKeys = keyOne })
	tb := outageGameOf(t, first, 5*time.Second)
	proxy.Cut()
	defer proxy.Restore()
	time.Sleep(8 * time.Second)

	later := gametest.Start(t, func(c *game.Config) { c.KeyPrefix, c.SigningKeys = first.Config.KeyPrefix, keyOne })
	on := &table{env: later, id: tb.id, seats: tb.seats}
	var g *gamev1.Game
	for end := time.Now().Add(time.Second); ; time.Sleep(100 * time.Millisecond) {
		g = on.get(t)
		if g.GetClocks().GetDeadline().AsTime().After(g.GetClocks().GetAsOf().AsTime()) || time.Now().After(end) {
			break
		}
	}
	deadline, asOf := g.GetClocks().GetDeadline().AsTime(), g.GetClocks().GetAsOf().AsTime()
	if !deadline.After(asOf) {
		_, err := later.Client.MakeMove(on.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h1g3"}})
		t.Fatalf("a second after the new process started, GetGame shows the game %v with Red's deadline %v ago (Red's clock %v), "+
			"while Red's move then is %v (nil: accepted, the silence excused); want the read to show the time given back",
			g.GetStatus(), asOf.Sub(deadline), g.GetClocks().GetFirst(), err)
	}
}

// TestAPartitionOfEveryProcessIsNotChargedToTheSideToMove: the game's
// process is killed (cut off for good) with Red to move and 9 s left,
// while the eight other processes, behind one link, are cut off from Redis
// together for 8 s; another starts a second after the link is back. Nobody
// could serve from about 2.5 s to 8 s. Each of the eight, renewing once
// its contact was back, took any other's beat since for service through
// its own break, and none recorded a silence unless it renewed before
// every other beat again: Red lost on time, 2 runs in 3. A process serves
// but for the breaks it reported, and the last to renew records what none
// served.
func TestAPartitionOfEveryProcessIsNotChargedToTheSideToMove(t *testing.T) {
	killedProxy := redistest.NewProxy(t, redistest.Addr(t))
	killed := gametest.StartOn(t, killedProxy.Addr(), func(c *game.Config) { c.SigningKeys = keyOne })
	link := redistest.NewProxy(t, redistest.Addr(t))
	for range behindTheLink {
		gametest.StartOn(t, link.Addr(), func(c *game.Config) {
			c.KeyPrefix, c.SigningKeys, c.PresenceLease = killed.Config.KeyPrefix, keyOne, time.Minute
		})
	}
	tb := outageGameOf(t, killed, 9*time.Second)
	before := tb.get(t).GetVersion()

	killedProxy.Cut()
	defer killedProxy.Restore()
	link.Cut()
	time.Sleep(8 * time.Second)
	link.Restore()
	time.Sleep(time.Second)

	on, resp, err := redMovesOnANewProcess(t, killed, tb)
	if err != nil || resp.GetGame().GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		g := on.get(t)
		t.Fatalf("the game's process was killed with Red to move (9 s left) while the %d others were cut off from Redis together for 8 s: "+
			"Red's move on a process started after: %v, game %v (%v); want it accepted, the time nobody served excused; events: %v",
			behindTheLink, err, g.GetStatus(), g.GetResult(), eventsAfter(t, on, before))
	}
	wantExcused(t, eventsAfter(t, on, before), 4*time.Second)
}

// behindTheLink is how many processes the partition cuts off.
const behindTheLink = 8
