package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/tlstest"
	"github.com/redis/go-redis/v9"
)

func lastJSON(t *testing.T, out string, v any) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), v); err != nil {
		t.Fatalf("last line %q is not the JSON report: %v", lines[len(lines)-1], err)
	}
}

// TestLoadtestGamesFindsNothingWrong runs a short load test against a real
// server on a real Redis: every move acknowledged must be in the final
// state and in both seats' streams exactly once.
func TestLoadtestGamesFindsNothingWrong(t *testing.T) {
	for _, batched := range []string{"false", "true"} {
		t.Run("autopipeline="+batched, func(t *testing.T) { loadtestGamesFindsNothingWrong(t, "--redis-autopipeline="+batched) })
	}
}

// TestLoadtestGamesRidesOutConnectionRenewals: a server renewing its
// connections often (--max-connection-age) cuts streams and calls at the
// grace's end; the load tool resumes them on a new connection, as an app
// does, and every move still arrives exactly once.
func TestLoadtestGamesRidesOutConnectionRenewals(t *testing.T) {
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		"--max-connection-age", "300ms", "--max-connection-age-grace", "200ms")
	out, errOut, code := palace("loadtest", "games", "--addr", addr, "--games", "6", "--duration", "3s", "--floor=false", "--reconnect-rate", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep gamesReport
	lastJSON(t, out, &rep)
	if rep.Moves == 0 || rep.Lost != 0 || rep.Duplicated != 0 || rep.Gaps != 0 || rep.Errors != 0 || rep.Failovers != 0 {
		t.Fatalf("load test under connection renewals: %+v\n%s", rep, errOut)
	}
	if rep.Renewed == 0 {
		t.Fatalf("no call or stream was renewed with its connection: %+v", rep)
	}
}

func loadtestGamesFindsNothingWrong(t *testing.T, flags ...string) {
	prefix := redistest.Prefix(t)
	addr := startServe(t, append([]string{"--redis-addr", redistest.Addr(t), "--key-prefix", prefix, "--ai-workers", "0"}, flags...)...)
	profile := filepath.Join(t.TempDir(), "cpu.prof")
	out, errOut, code := palace("loadtest", "games", "--addr", addr, "--games", "6", "--duration", "2s", "--warmup", "500ms", "--retry-rate", "0.3", "--reconnect-rate", "0.2", "--cpuprofile", profile)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if fi, err := os.Stat(profile); err != nil || fi.Size() == 0 {
		t.Fatalf("no CPU profile of the load tool written: %v", err)
	}
	var rep gamesReport
	lastJSON(t, out, &rep)
	if rep.Moves == 0 || rep.Games < 6 || rep.FloorPerS == 0 {
		t.Fatalf("nothing measured: %+v", rep)
	}
	// The floor is measured on both sides of the games and combined.
	lo, hi := min(rep.FloorBeforePerS, rep.FloorAfterPerS), max(rep.FloorBeforePerS, rep.FloorAfterPerS)
	if lo <= 0 || rep.FloorPerS < lo || rep.FloorPerS > hi {
		t.Fatalf("floor %.0f/s is not between its halves %.0f/s and %.0f/s", rep.FloorPerS, rep.FloorBeforePerS, rep.FloorAfterPerS)
	}
	if b, g, a := strings.Index(errOut, "floor before"), strings.Index(errOut, "games:"), strings.Index(errOut, "floor after"); b < 0 || !(b < g && g < a) {
		t.Fatalf("phases not in the order floor, games, floor:\n%s", errOut)
	}
	if rep.Lost != 0 || rep.Duplicated != 0 || rep.Gaps != 0 || rep.Errors != 0 {
		t.Fatalf("load test found faults: %+v\n%s", rep, errOut)
	}
	if rep.Retries == 0 || rep.Reconnects == 0 {
		t.Fatalf("no retries or reconnects exercised: %+v", rep)
	}
	if rep.JanggiGames == 0 || rep.XiangqiGames == 0 || rep.JanggiMoves == 0 || rep.XiangqiMoves == 0 ||
		rep.JanggiGames+rep.XiangqiGames != rep.Games || rep.JanggiMoves+rep.XiangqiMoves != rep.Moves {
		t.Fatalf("games and moves by kind do not add up to both kinds played: %+v", rep)
	}
	// The floor's clients write a key each, as the games do: one key for
	// all would be one Redis Cluster slot for the whole floor.
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	defer rdb.Close()
	keys, err := rdb.Keys(t.Context(), prefix+"probe:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2*6 {
		t.Fatalf("the floor's 6 clients, before and after the games, wrote %d keys, want 12: %v", len(keys), keys)
	}
	if rep.EventP50ms <= 0 || rep.EventP99ms < rep.EventP50ms {
		t.Fatalf("no times from moves to the opponents' streams: %+v", rep)
	}
	if rep.P50ms <= 0 || rep.P99ms < rep.P50ms || rep.MaxMs < rep.P99ms {
		t.Fatalf("move latencies out of order, p50 <= p99 <= max: %+v", rep)
	}
	if want := rep.MovesPerS / rep.FloorPerS; math.Abs(rep.Ratio-want) > 1e-9*want {
		t.Fatalf("ratio %v, want moves_per_s / floor_per_s = %v", rep.Ratio, want)
	}
	// Each half of the floor is reported as its progress line said.
	for when, perS := range map[string]float64{"before": rep.FloorBeforePerS, "after": rep.FloorAfterPerS} {
		if line := fmt.Sprintf("floor %s the games: %.0f calls/s", when, perS); !strings.Contains(errOut, line) {
			t.Fatalf("no %q on stderr, as the report has it:\n%s", line, errOut)
		}
	}
	// The rate leaves the warm-up out; the move count does not.
	if rep.WarmupS != 0.5 || rep.MovesPerS*1.5 > float64(rep.Moves)+0.5 {
		t.Fatalf("warm-up not applied as asked: %+v", rep)
	}
	// More games than the connections carry would wait, unseen, on them.
	if _, errOut, code := palace("loadtest", "games", "--addr", addr, "--games", "2001", "--conns", "2"); code != exitUsage || !strings.Contains(errOut, "--conns to at least 3") {
		t.Fatalf("2,001 games over 2 connections: exit %d, %q; want %d asking for 3", code, errOut, exitUsage)
	}
	if _, _, code := palace("loadtest", "games", "--addr", addr, "--duration", "2s", "--warmup", "2s"); code != exitUsage {
		t.Fatalf("a warm-up as long as the run: exit %d, want %d", code, exitUsage)
	}
	if _, _, code := palace("loadtest", "games", "--addr", addr, "--duration", "2s", "--warmup", "1s"); code != exitUsage {
		t.Fatalf("a warm-up as long as a half of the floor: exit %d, want %d", code, exitUsage)
	}
}

// TestLoadtestGamesOutlivesItsReplicas plays games on two replicas of the
// game service sharing one Redis. One is cut off from its clients for a
// second, as a crash or a partition looks to them: every connection drops,
// calls in flight lose their answers, new ones are refused. Later the
// other is stopped, as a deployment stops a replica. The clients move to
// the replica that is left and send the same requests again: no move may
// be lost or doubled, and no stream may skip or repeat a version.
func TestLoadtestGamesOutlivesItsReplicas(t *testing.T) {
	shared := []string{"--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		// Either replica must accept the seat credentials the other signed.
		"--seat-signing-keys", "k1:" + strings.Repeat("5e", 32)}
	a := startServe(t, shared...)
	b, stopB := startServeStoppable(t, shared...)
	toA := redistest.NewProxy(t, a)
	rep := gamesUnderFaults(t, toA.Addr()+","+b, func() {
		toA.Cut()
		time.Sleep(time.Second)
		toA.Restore()
		time.Sleep(time.Second)
		stopB()
	})
	// Both losses must have moved clients: games of both replicas were in
	// play when each went away.
	if rep.Moves == 0 || rep.Failovers < 2 {
		t.Fatalf("no failover exercised: %+v", rep)
	}
}

// TestLoadtestGamesMovesOffAFrozenReplica: one of two replicas stops
// answering for two seconds without closing its connections (a pause of
// its VM, a stall of the network), then answers what it held. A call that
// outlives --call-timeout there is sent again to the other replica, as a
// client with somewhere else to go does, and not counted an error; the
// requests the frozen replica applies late must apply nothing twice.
func TestLoadtestGamesMovesOffAFrozenReplica(t *testing.T) {
	shared := []string{"--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		"--seat-signing-keys", "k1:" + strings.Repeat("5e", 32)}
	a, b := startServe(t, shared...), startServe(t, shared...)
	toA := redistest.NewProxy(t, a)
	rep := gamesUnderFaults(t, toA.Addr()+","+b, func() {
		toA.Hold()
		time.Sleep(2 * time.Second)
		toA.Restore()
	}, "--call-timeout", "500ms")
	if rep.Moves == 0 || rep.Failovers == 0 {
		t.Fatalf("no failover exercised: %+v", rep)
	}
}

// TestLoadtestGamesFloorFollowsTheReplicas: with one of two replicas down
// from the start, the floor's calls move to the other as the games' do,
// and the run is clean, instead of the floor spinning on refused calls.
func TestLoadtestGamesFloorFollowsTheReplicas(t *testing.T) {
	shared := []string{"--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		"--seat-signing-keys", "k1:" + strings.Repeat("5e", 32)}
	a := startServe(t, shared...)
	b, stopB := startServeStoppable(t, shared...)
	stopB()
	out, errOut, code := palace("loadtest", "games", "--addr", a+","+b, "--games", "8", "--duration", "2s", "--think", "5ms")
	var rep gamesReport
	lastJSON(t, out, &rep)
	if code != exitOK || rep.Errors != 0 || rep.FloorBeforePerS == 0 || rep.FloorAfterPerS == 0 || rep.Failovers == 0 {
		t.Fatalf("exit %d, report %+v\n%s", code, rep, errOut)
	}
}

// TestLoadtestGamesEndsWhenTheServerStopsAnswering: a server that stops
// answering without closing its connections (frozen, or cut off by the
// network) fails the run within a few call timeouts, with errors, instead
// of holding it without a report.
func TestLoadtestGamesEndsWhenTheServerStopsAnswering(t *testing.T) {
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	proxy := redistest.NewProxy(t, addr)
	time.AfterFunc(500*time.Millisecond, proxy.Blackhole)
	start := time.Now()
	out, errOut, code := palace("loadtest", "games", "--addr", proxy.Addr(), "--games", "4", "--duration", "2s", "--think", "5ms",
		"--floor=false", "--call-timeout", "500ms")
	var rep gamesReport
	lastJSON(t, out, &rep)
	if code != exitFail || rep.Errors == 0 {
		t.Fatalf("exit %d, report %+v, want %d and errors\n%s", code, rep, exitFail, errOut)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("the run took %v", took)
	}
}

// TestLoadtestGamesRidesOutARedisOutage: the service loses Redis for a
// second under load. With --retry-unavailable the load tool sends its
// calls and streams again, as a client riding out a Redis failover would,
// and finds nothing lost, doubled or skipped.
func TestLoadtestGamesRidesOutARedisOutage(t *testing.T) {
	toRedis := redistest.NewProxy(t, redistest.Addr(t))
	addr := startServe(t, "--redis-addr", toRedis.Addr(), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	rep := gamesUnderFaults(t, addr, func() {
		toRedis.Cut()
		time.Sleep(time.Second)
		toRedis.Restore()
	}, "--retry-unavailable")
	if rep.Moves == 0 || rep.Failovers == 0 {
		t.Fatalf("no call was sent again: %+v", rep)
	}
}

// gamesUnderFaults runs the games load test on addr for 5 s, calls faults
// 1.5 s in, and requires a report free of faults.
func gamesUnderFaults(t *testing.T, addr string, faults func(), args ...string) gamesReport {
	t.Helper()
	out, errOut, code := palaceUnderFaults(1500*time.Millisecond, faults, append([]string{"loadtest", "games", "--addr", addr, "--games", "16", "--duration", "5s",
		"--floor=false", "--retry-rate", "0.1", "--reconnect-rate", "0.05"}, args...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep gamesReport
	lastJSON(t, out, &rep)
	if rep.Lost != 0 || rep.Duplicated != 0 || rep.Gaps != 0 || rep.Errors != 0 {
		t.Fatalf("load test found faults: %+v\n%s", rep, errOut)
	}
	return rep
}

// palaceUnderFaults runs palace with args, calls faults after the given
// time, and returns what palace did once both are done.
func palaceUnderFaults(after time.Duration, faults func(), args ...string) (out, errOut string, code int) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, errOut, code = palace(args...)
	}()
	time.Sleep(after)
	faults()
	<-done
	return out, errOut, code
}

func TestLoadtestAIReportsJobs(t *testing.T) {
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	out, errOut, code := palace("loadtest", "ai", "--addr", addr, "--level", "1", "--clients", "2", "--duration", "1s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep aiReport
	lastJSON(t, out, &rep)
	if rep.Jobs == 0 || rep.Errors != 0 || rep.Nodes == 0 {
		t.Fatalf("report %+v\n%s", rep, errOut)
	}
}

// TestLoadtestAIExitsOneOnErrors: failed calls still give a report, and
// the exit status says they failed.
func TestLoadtestAIExitsOneOnErrors(t *testing.T) {
	out, errOut, code := palace("loadtest", "ai", "--addr", "127.0.0.1:1", "--level", "1", "--clients", "1", "--duration", "300ms")
	var rep aiReport
	lastJSON(t, out, &rep)
	if code != exitFail || rep.Errors == 0 {
		t.Fatalf("exit %d with report %+v, want %d and errors: %s", code, rep, exitFail, errOut)
	}
}

func TestEngineMatchPrintsTable(t *testing.T) {
	out, errOut, code := palace("engine", "match", "--a", "level:2", "--b", "level:1", "--games", "2", "--variant", "janggi", "--opening-plies", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "palace-level-2") || !strings.Contains(out, "elo") || strings.Count(errOut, "game ") != 2 {
		t.Fatalf("stdout %q stderr %q", out, errOut)
	}
	if _, _, code := palace("engine", "match", "--a", "level:11"); code == 0 {
		t.Fatal("accepted level 11")
	}
}

// TestEngineMatchRefusesAdjudicationOutOfRange: a negative resign score
// would adjudicate level games as lost, and a negative opening length
// play every game from the start position; both are refused, named,
// before a game is played.
func TestEngineMatchRefusesAdjudicationOutOfRange(t *testing.T) {
	for _, tc := range []struct{ flag, value string }{
		{"--resign-score", "-500"}, {"--resign-score", "0"}, {"--resign-moves", "-1"},
		{"--draw-moves", "-1"}, {"--draw-score", "-15"}, {"--draw-after", "-1"}, {"--opening-plies", "-3"},
	} {
		_, errOut, code := palace("engine", "match", "--a", "level:1", "--b", "level:1", "--games", "2", tc.flag, tc.value)
		if code != exitUsage || !strings.Contains(errOut, tc.flag) || strings.Contains(errOut, "game 1/") {
			t.Errorf("%s %s: exit %d, stderr %q; want %d naming the flag, before any game", tc.flag, tc.value, code, errOut, exitUsage)
		}
	}
	if _, errOut, code := palace("engine", "match", "--a", "level:1", "--b", "level:1", "--games", "2", "--resign-moves", "0", "--resign-score", "0"); code != 0 {
		t.Fatalf("no resignation (--resign-moves 0) with --resign-score 0: exit %d: %s", code, errOut)
	}
}

func TestUCIAnswersHandshake(t *testing.T) {
	var out strings.Builder
	code := run(context.Background(), []string{"uci"}, strings.NewReader("uci\nisready\nquit\n"), &out, &strings.Builder{})
	if code != 0 || !strings.Contains(out.String(), "uciok") || !strings.Contains(out.String(), "readyok") {
		t.Fatalf("exit %d, output %q", code, out.String())
	}
}

// TestGamesCheckCountsFaults feeds the load tool's checker streams with a
// repeated event, a skipped version and a missing move.
// ev is a streamed event for the check.
func ev(v uint64, p played) seen { return seen{version: v, played: p} }

// ended are streams that ended as streams should.
func ended(evs ...[]seen) []streamed {
	out := make([]streamed, len(evs))
	for i, e := range evs {
		out[i] = streamed{events: e, complete: true}
	}
	return out
}

func TestGamesCheckCountsFaults(t *testing.T) {
	final := &gamev1.Game{Version: 4, Moves: []*gamev1.MoveRecord{
		{Ply: 1, Move: &commonv1.Move{Coordinate: "h3e3"}},
		{Ply: 2, Move: &commonv1.Move{Coordinate: "h8e8"}},
	}}
	acked := []played{{1, "h3e3"}, {2, "h8e8"}}
	good := []seen{ev(1, played{}), ev(2, played{}), ev(3, played{1, "h3e3"}), ev(4, played{2, "h8e8"})}
	var l gamesLoad
	l.check(final, acked, played{}, ended(good, good))
	if l.lost.Load()+l.dup.Load()+l.gaps.Load() != 0 {
		t.Fatalf("faults in a clean game: lost %d dup %d gaps %d", l.lost.Load(), l.dup.Load(), l.gaps.Load())
	}
	repeated := []seen{ev(1, played{}), ev(2, played{}), ev(2, played{}), ev(3, played{1, "h3e3"}), ev(4, played{2, "h8e8"})}
	skipped := []seen{ev(1, played{}), ev(3, played{1, "h3e3"}), ev(4, played{2, "h8e8"})}
	missing := []seen{ev(1, played{}), ev(2, played{}), ev(3, played{1, "h3e3"}), ev(4, played{})}
	l.check(final, acked, played{}, ended(repeated, skipped, missing))
	if l.dup.Load() != 1 || l.gaps.Load() != 1 || l.lost.Load() != 1 {
		t.Fatalf("lost %d dup %d gaps %d, want 1 each", l.lost.Load(), l.dup.Load(), l.gaps.Load())
	}
	var l2 gamesLoad
	l2.check(&gamev1.Game{Version: 4, Moves: final.Moves[:1]}, acked, played{}, nil)
	if l2.lost.Load() != 1 {
		t.Fatalf("a move missing from the final state: lost %d, want 1", l2.lost.Load())
	}
	// A move played twice under new versions, with the game's version
	// grown to match: no version repeats, but a ply does.
	doubled := []seen{ev(1, played{}), ev(2, played{}), ev(3, played{1, "h3e3"}), ev(4, played{1, "h3e3"}), ev(5, played{2, "h8e8"})}
	var l3 gamesLoad
	l3.check(&gamev1.Game{Version: 5, Moves: final.Moves}, acked, played{}, ended(doubled))
	if l3.dup.Load() != 1 || l3.lost.Load()+l3.gaps.Load() != 0 {
		t.Fatalf("a ply streamed twice: lost %d dup %d gaps %d, want dup 1 only", l3.lost.Load(), l3.dup.Load(), l3.gaps.Load())
	}
	// A lost move and a move nobody played in the final state do not
	// cancel out; the move of a failed call (ply 3) may be there.
	var l4 gamesLoad
	l4.check(&gamev1.Game{Version: 5, Moves: []*gamev1.MoveRecord{final.Moves[0], {Ply: 3, Move: &commonv1.Move{Coordinate: "a1a2"}}}}, acked, played{}, nil)
	if l4.lost.Load() != 1 || l4.dup.Load() != 1 {
		t.Fatalf("a lost move and an extra one: lost %d dup %d, want 1 each", l4.lost.Load(), l4.dup.Load())
	}
	var l5 gamesLoad
	l5.check(&gamev1.Game{Version: 5, Moves: append(slices.Clone(final.Moves), &gamev1.MoveRecord{Ply: 3, Move: &commonv1.Move{Coordinate: "a1a2"}})}, acked, played{3, "a1a2"}, nil)
	if l5.lost.Load()+l5.dup.Load() != 0 {
		t.Fatalf("the move of a failed call applied all the same: lost %d dup %d, want none", l5.lost.Load(), l5.dup.Load())
	}
	// A stream that reconnected with a snapshot has the moves before it
	// from the snapshot, and its events go on after the snapshot's
	// version; a snapshot behind what its stream had sent is a gap.
	snap := func(v uint64, moves ...played) []seen {
		out := []seen{{version: v, snapshot: true}}
		for _, m := range moves {
			out = append(out, seen{version: v, played: m, inSnapshot: true})
		}
		return out
	}
	resumed := slices.Concat([]seen{ev(1, played{})}, snap(3, played{1, "h3e3"}), []seen{ev(4, played{2, "h8e8"})})
	fromSnapshot := slices.Concat(snap(4, played{1, "h3e3"}, played{2, "h8e8"}))
	again := slices.Concat(good[:3], snap(3, played{1, "h3e3"}), good[3:])
	var l7 gamesLoad
	l7.check(final, acked, played{}, ended(resumed, fromSnapshot, again))
	if l7.lost.Load()+l7.dup.Load()+l7.gaps.Load()+l7.errs.Load() != 0 {
		t.Fatalf("streams resumed with snapshots: lost %d dup %d gaps %d errors %d, want none", l7.lost.Load(), l7.dup.Load(), l7.gaps.Load(), l7.errs.Load())
	}
	behind := slices.Concat(good[:3], snap(1), good[3:])
	other := slices.Concat(good[:3], snap(3, played{1, "a1a2"}), good[3:])
	var l8 gamesLoad
	l8.check(final, acked, played{}, ended(behind, other))
	if l8.gaps.Load() != 1 || l8.errs.Load() != 1 || l8.lost.Load()+l8.dup.Load() != 0 {
		t.Fatalf("a snapshot behind its stream, and one with another move: lost %d dup %d gaps %d errors %d, want gaps 1 and errors 1",
			l8.lost.Load(), l8.dup.Load(), l8.gaps.Load(), l8.errs.Load())
	}
	// A move stored, or streamed, other than the one acknowledged at its
	// ply is lost, though the ply is there.
	var l9 gamesLoad
	l9.check(&gamev1.Game{Version: 4, Moves: []*gamev1.MoveRecord{final.Moves[0], {Ply: 2, Move: &commonv1.Move{Coordinate: "a1a2"}}}}, acked, played{}, nil)
	if l9.lost.Load() != 1 || l9.dup.Load()+l9.gaps.Load() != 0 {
		t.Fatalf("another move stored at ply 2: lost %d dup %d gaps %d, want lost 1 only", l9.lost.Load(), l9.dup.Load(), l9.gaps.Load())
	}
	var l10 gamesLoad
	l10.check(final, acked, played{}, ended(slices.Concat(good[:3], []seen{ev(4, played{2, "a1a2"})})))
	if l10.lost.Load() != 1 || l10.dup.Load()+l10.gaps.Load() != 0 {
		t.Fatalf("another move streamed at ply 2: lost %d dup %d gaps %d, want lost 1 only", l10.lost.Load(), l10.dup.Load(), l10.gaps.Load())
	}
	// A stream that ended as a stream should, short of the game's last
	// version, skipped its end even with every move in it: a gap.
	var l11 gamesLoad
	l11.check(&gamev1.Game{Version: 5, Moves: final.Moves}, acked, played{}, ended(good))
	if l11.gaps.Load() != 1 || l11.lost.Load()+l11.dup.Load() != 0 {
		t.Fatalf("a stream ending at version 4 of 5: lost %d dup %d gaps %d, want gaps 1 only", l11.lost.Load(), l11.dup.Load(), l11.gaps.Load())
	}
	// A stream cut off by an error (counted as an error) is checked for
	// what it delivered: a repeat in it counts, what it never got does
	// not count as lost.
	var l6 gamesLoad
	cut := []seen{ev(1, played{}), ev(2, played{}), ev(2, played{})}
	l6.check(final, acked, played{}, []streamed{{events: cut}})
	if l6.dup.Load() != 1 || l6.lost.Load()+l6.gaps.Load() != 0 {
		t.Fatalf("a stream cut off after version 2, which it got twice: lost %d dup %d gaps %d, want dup 1 only", l6.lost.Load(), l6.dup.Load(), l6.gaps.Load())
	}
}

// TestGamesTimeEventsOnTheOpponentsStream: a move's event time runs from
// its sending to its first arrival on the other seat's stream.
func TestGamesTimeEventsOnTheOpponentsStream(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	first := []seen{
		{version: 3, played: played{1, "h3e3"}, at: at(1)},
		{version: 4, played: played{2, "h8e8"}, at: at(17)},
	}
	second := []seen{
		{version: 3, played: played{1, "h3e3"}, at: at(3)},
		{version: 4, played: played{2, "h8e8"}, at: at(12)},
		// Read again after a reconnection: the first arrival counts.
		{version: 3, played: played{1, "h3e3"}, at: at(50)},
	}
	measured := []sent{{ply: 1, seat: 0, at: at(0)}, {ply: 2, seat: 1, at: at(10)}, {ply: 3, seat: 0, at: at(20)}}
	var l gamesLoad
	l.timeEvents(measured, ended(first, second))
	// Ply 3 never arrived: check counts it lost, and it has no time.
	want := []time.Duration{3 * time.Millisecond, 7 * time.Millisecond}
	if !slices.Equal(l.eventLat, want) {
		t.Fatalf("event times %v, want %v", l.eventLat, want)
	}
}

func TestLoadtestGamesUsage(t *testing.T) {
	for _, args := range [][]string{{"--retry-rate", "-3"}, {"--reconnect-rate", "9"}, {"--think", "-5s"}, {"--call-timeout", "0s"}} {
		if _, errOut, code := palace(append([]string{"loadtest", "games"}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want usage: %s", args, code, errOut)
		}
	}
}

// TestLoadtestsOverTLS: every load tool reaches a server that serves TLS
// with --tls, and one without it fails there instead of measuring nothing.
func TestLoadtestsOverTLS(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	tlstest.WriteCert(t, certPath, keyPath, "palace")
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--tls-cert", certPath, "--tls-key", keyPath)

	runs := map[string][]string{
		"games":       {"loadtest", "games", "--addr", addr, "--games", "4", "--duration", "1s", "--floor=false"},
		"clocks":      {"loadtest", "clocks", "--addr", addr, "--games", "6", "--spread", "500ms", "--min-time", "2s", "--max-time", "2s"},
		"matchmaking": {"loadtest", "matchmaking", "--addr", addr, "--game-addr", addr, "--tickets", "6", "--timeout", "60s"},
		"ai":          {"loadtest", "ai", "--addr", addr, "--level", "1", "--clients", "1", "--duration", "500ms"},
	}
	for name, args := range runs {
		t.Run(name, func(t *testing.T) {
			out, errOut, code := palace(append(args, "--tls", certPath)...)
			if code != exitOK {
				t.Fatalf("over TLS: exit %d: %s\n%s", code, out, errOut)
			}
			var rep struct {
				Errors int `json:"errors"`
			}
			lastJSON(t, out, &rep)
			if rep.Errors != 0 {
				t.Fatalf("over TLS: %d errors: %s", rep.Errors, out)
			}
			if _, errOut, code := palace(append(args, "--tls-server-name", "palace")...); code != exitUsage || !strings.Contains(errOut, "--tls-server-name needs --tls") {
				t.Fatalf("--tls-server-name without --tls: exit %d: %s", code, errOut)
			}
			if _, errOut, code := palace(append(args, "--tls", filepath.Join(dir, "none.pem"))...); code != exitUsage || !strings.Contains(errOut, "--tls") {
				t.Fatalf("--tls of a missing file: exit %d: %s", code, errOut)
			}
		})
	}
	// A certificate without the name asked for, and plaintext to the TLS
	// port, fail the run; plaintext is told to add --tls.
	for _, extra := range [][]string{{"--tls", certPath, "--tls-server-name", "other.example"}, nil} {
		if out, errOut, code := palace(append(append(runs["games"], "--call-timeout", "2s"), extra...)...); code != exitFail || (extra == nil && !strings.Contains(errOut, "add --tls")) {
			t.Fatalf("%v: exit %d, want %d, plaintext told to add --tls: %s\n%s", extra, code, exitFail, out, errOut)
		}
	}
	// And TLS to a plaintext port is told to drop it.
	plain := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t))
	if _, errOut, code := palace("health", "--addr", plain, "--tls", certPath); code != exitFail || !strings.Contains(errOut, "drop --tls") {
		t.Fatalf("health over TLS to a plaintext port: exit %d, want %d, told to drop --tls: %s", code, exitFail, errOut)
	}
}

// TestGamesReportUnplayed: a run that counted no fault still fails when it
// played no move, or only one kind of game in two or more, since all
// zeros from such a server would read as a pass; an interrupted run says
// so itself.
func TestGamesReportUnplayed(t *testing.T) {
	both := gamesReport{Games: 2, JanggiGames: 1, XiangqiGames: 1, Moves: 10}
	tests := []struct {
		name     string
		edit     func(*gamesReport)
		unplayed bool
	}{
		{name: "both kinds played", edit: func(*gamesReport) {}},
		{name: "one game of one kind", edit: func(r *gamesReport) { r.Games, r.XiangqiGames = 1, 0 }},
		{name: "no move", edit: func(r *gamesReport) { r.Moves = 0 }, unplayed: true},
		{name: "no Janggi game", edit: func(r *gamesReport) { r.JanggiGames, r.XiangqiGames = 0, 2 }, unplayed: true},
		{name: "no Xiangqi game", edit: func(r *gamesReport) { r.JanggiGames, r.XiangqiGames = 2, 0 }, unplayed: true},
		{name: "interrupted before a move", edit: func(r *gamesReport) { r.Moves, r.Interrupted = 0, true }},
	}
	for _, tt := range tests {
		r := both
		tt.edit(&r)
		if got := r.unplayed(); (got != "") != tt.unplayed {
			t.Errorf("%s: unplayed() = %q, want a reason: %v", tt.name, got, tt.unplayed)
		}
	}
}

// TestLoadtestGamesInterrupted: a run stopped before its end (Ctrl-C)
// reports what it did, marked interrupted, and fails, since it did not
// test what was asked; its own cancellations of calls and streams are no
// errors, and the games it left unchecked count nothing lost.
func TestLoadtestGamesInterrupted(t *testing.T) {
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Stopped long before its end, as the faults tests' runs end: with
	// moves acknowledged.
	time.AfterFunc(1500*time.Millisecond, cancel)
	var out, errOut strings.Builder
	code := run(ctx, []string{"loadtest", "games", "--addr", addr, "--games", "4", "--duration", "60s", "--floor=false"}, strings.NewReader(""), &out, &errOut)
	var rep gamesReport
	lastJSON(t, out.String(), &rep)
	if code != exitFail || !rep.Interrupted || rep.Moves == 0 {
		t.Fatalf("exit %d, report %+v; want %d, interrupted, with moves\n%s", code, rep, exitFail, errOut.String())
	}
	if rep.Lost+rep.Duplicated+rep.Gaps+rep.Errors != 0 {
		t.Fatalf("the run's own cancellations counted as faults: %+v\n%s", rep, errOut.String())
	}
}

// TestLoadtestGamesRateLeavesTheWarmupOut: a paced run, its moves spread
// evenly, whose warm-up takes three quarters of it. The rate counts the
// moves of the last quarter only, over that quarter: times that quarter,
// it gives about a quarter of the moves, far from all of them (warm-up
// counted) and from the warm-up's three quarters (the wrong side of it).
func TestLoadtestGamesRateLeavesTheWarmupOut(t *testing.T) {
	addr := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	out, errOut, code := palace("loadtest", "games", "--addr", addr, "--games", "8", "--duration", "2s", "--warmup", "1500ms",
		"--think", "10ms", "--floor=false", "--retry-rate", "0", "--reconnect-rate", "0")
	var rep gamesReport
	lastJSON(t, out, &rep)
	if code != exitOK || rep.Moves < 40 {
		t.Fatalf("exit %d, report %+v; want a clean run of moves\n%s", code, rep, errOut)
	}
	share := rep.MovesPerS * 0.5 / float64(rep.Moves)
	t.Logf("%d moves, %.0f/s: the last 0.5 s has %.0f%% of them", rep.Moves, rep.MovesPerS, 100*share)
	// Wide: on a busy machine the games may start late, crowding the
	// moves towards the end.
	if share < 0.1 || share > 0.6 {
		t.Fatalf("the rate over the last 0.5 s accounts for %.0f%% of the moves, want about 25%%: %+v", 100*share, rep)
	}
}
