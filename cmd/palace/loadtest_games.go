package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/server"
)

// gamesReport is the load test's result, printed as its last line.
type gamesReport struct {
	Games int64 `json:"games"`
	// The games and moves of each kind: kinds alternate, so a run of two
	// games or more plays both, and a kind the server does not play shows.
	JanggiGames  int64 `json:"janggi_games"`
	XiangqiGames int64 `json:"xiangqi_games"`
	JanggiMoves  int64 `json:"janggi_moves"`
	XiangqiMoves int64 `json:"xiangqi_moves"`
	// Moves counts every acknowledged move; the rate and the latencies
	// leave out the warm-up (the first WarmupS seconds of each phase),
	// while every move is checked against the streams and final states.
	Moves     int64   `json:"moves"`
	WarmupS   float64 `json:"warmup_s"`
	MovesPerS float64 `json:"moves_per_s"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	// MaxMs is the slowest measured move: a stall shows here even when
	// too few moves waited for p99 to show it.
	MaxMs float64 `json:"max_ms"`
	// Lost counts acknowledged moves missing from the final state, from
	// a stream that ended as a stream should, or from a snapshot at or
	// after their version (a game that is gone loses every move); a
	// stream cut off by an error counts as an error, and what it never
	// delivered is not counted again as lost.
	Lost       int64 `json:"lost"`
	Duplicated int64 `json:"duplicated"`
	Gaps       int64 `json:"gaps"`
	Errors     int64 `json:"errors"`
	// Retries counts requests sent again with the same request id: at
	// once after the answer, alongside the first call, or later in the
	// game (after the opponent's reply, or after the end). Each must get
	// the first answer, whole; a different one counts as duplicated.
	Retries    int64 `json:"retries"`
	Reconnects int64 `json:"reconnects"`
	// Failovers counts calls and streams sent again, to the next replica,
	// because theirs was unavailable (with several replicas, or with
	// --retry-unavailable), or, with several, held a call past
	// --call-timeout or a stream silent past --stream-silence.
	Failovers int64 `json:"failovers"`
	// Renewed counts calls and streams sent again, to the same replica,
	// because it closed their connection at its age
	// (--max-connection-age), which is no fault.
	Renewed int64 `json:"renewed"`
	// EventP50ms and EventP99ms: from sending a move to its event reaching
	// the opponent's stream, as the opponent's screen would show it; a
	// stream reconnecting in between counts its reconnection.
	EventP50ms float64 `json:"event_p50_ms"`
	EventP99ms float64 `json:"event_p99_ms"`
	// The floor: the same number of clients calling Probe (one Redis
	// write through the same server path) for the same duration, half
	// before the games and half after them, so that a machine whose speed
	// drifts during the run weighs on both sides of the ratio alike.
	FloorPerS       float64 `json:"floor_per_s,omitempty"`
	FloorP50ms      float64 `json:"floor_p50_ms,omitempty"`
	FloorP99ms      float64 `json:"floor_p99_ms,omitempty"`
	FloorBeforePerS float64 `json:"floor_before_per_s,omitempty"`
	FloorAfterPerS  float64 `json:"floor_after_per_s,omitempty"`
	// Ratio is moves_per_s / floor_per_s.
	Ratio float64 `json:"ratio,omitempty"`
	// Interrupted: the run was stopped (Ctrl-C) before its end; the
	// figures cover what was done, and the tool's own cancellations are
	// no errors.
	Interrupted bool `json:"interrupted,omitempty"`
}

type gamesLoad struct {
	think  time.Duration
	warmup time.Duration
	// silence is the longest a stream may hear nothing, not even a
	// heartbeat, before it counts as cut off (--stream-silence).
	silence time.Duration
	// replicas holds the connections to each replica of the service.
	replicas [][]gamev1.GameServiceClient
	// retryUnavailable sends a call again after Unavailable even to a
	// single replica.
	retryUnavailable bool
	started          time.Time
	// play ends when the run's duration does: a move acknowledged after
	// it is checked, and its latency measured, but it is not counted in
	// the rate over that duration.
	play context.Context
	rng  func() *rand.Rand

	games, moves, measured, lost, dup, gaps, errs, retries, reconnects, failovers, renewed atomic.Int64
	// kindGames and kindMoves count by kind: Janggi first, then Xiangqi.
	kindGames, kindMoves [2]atomic.Int64

	mu sync.Mutex
	// lat holds the moves' round trips; eventLat the times until the
	// opponents' streams had them.
	lat, eventLat []time.Duration
	err           []string
}

// failUnless counts err as an error unless the run was interrupted
// (all, the process's context, ended), which cancelled the call itself.
func (l *gamesLoad) failUnless(all context.Context, format string, a ...any) {
	if all.Err() != nil {
		return
	}
	l.fail(format, a...)
}

func (l *gamesLoad) fail(format string, a ...any) {
	l.errs.Add(1)
	l.mu.Lock()
	if len(l.err) < 10 {
		l.err = append(l.err, fmt.Sprintf(format, a...))
	}
	l.mu.Unlock()
}

// maxGamesPerConn keeps a connection's calls and streams (each game's
// two seats' streams, its move and a retry) within the 4,096 a Palace
// server carries on one connection.
const maxGamesPerConn = 1000

func runLoadtestGames(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("palace loadtest games", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "localhost:8080", "game service host:port; several, comma-separated, are replicas: each game starts on one and moves to the next while its replica is unavailable (stopped, killed, cut off), sending the same request again")
	games := fs.Int("games", 100, "concurrent games")
	duration := fs.Duration("duration", 30*time.Second, "how long to play")
	floor := fs.Bool("floor", true, "also measure the floor (Probe: one Redis write) for the same duration, half before the games and half after")
	retryRate := finiteFlag(fs, "retry-rate", 0.05, "share of moves sent twice with the same request id")
	reconnectRate := finiteFlag(fs, "reconnect-rate", 0.01, "chance a stream reconnects after each event")
	retryUnavailable := fs.Bool("retry-unavailable", false, "send a call or stream that got Unavailable again, with the same request id, even with one replica, as a client riding out a Redis failover or restart would (for up to about 13 s); otherwise a single replica's Unavailable is an error")
	conns := fs.Int("conns", 0, "client connections per replica (default: one per 100 games)")
	seed := fs.Uint64("seed", 1, "random seed")
	think := fs.Duration("think", 0, "mean pause between a game's moves (uniform in [0, 2*think]); 0 plays flat out")
	serviceKeys := serviceKeysFlag(fs)
	cpuProfile := fs.String("cpuprofile", "", "write the load tool's own CPU profile to this file (it shares the machine with the server it measures)")
	callTimeout := fs.Duration("call-timeout", 10*time.Second, "longest a call may take before it is sent again to the next replica, with several, or else counts as an error (a server that stops answering must not hang the run); a call sent again gets a timeout of its own")
	silence := fs.Duration("stream-silence", defaultStreamSilence, "longest a stream may hear nothing, not even a heartbeat, before it counts as cut off (a replica partitioned away keeps its connections open, silent): with several replicas it resumes on the next one, as after Unavailable; with one it is an error. Keep it several of the servers' --heartbeat (15s by default)")
	warmup := fs.Duration("warmup", 0, "leave the first D of each phase (floor and games) out of the rates and latencies, so 1,000 games arriving at once do not count as steady load; every move is still checked")
	getTransport := transportFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	tr, err := getTransport()
	if err != nil {
		fmt.Fprintf(stderr, "palace loadtest games: %v\n", err)
		return exitUsage
	}
	if *games < 1 || *games > 100000 || *duration <= 0 || *duration > time.Hour {
		fmt.Fprintln(stderr, "palace loadtest games: --games must be 1..100000 and --duration positive, at most 1h")
		return exitUsage
	}
	if *retryRate < 0 || *retryRate > 1 || *reconnectRate < 0 || *reconnectRate > 1 || *think < 0 || *callTimeout <= 0 || *silence <= 0 {
		fmt.Fprintln(stderr, "palace loadtest games: --retry-rate and --reconnect-rate must be 0..1, --think at least 0, --call-timeout and --stream-silence positive")
		return exitUsage
	}
	if *warmup < 0 || *warmup >= *duration || (*floor && *warmup >= *duration/2) {
		fmt.Fprintln(stderr, "palace loadtest games: --warmup must be at least 0 and shorter than --duration (than half of it with --floor: each half of the floor has its warm-up)")
		return exitUsage
	}
	service, err := asService(*serviceKeys, "palace loadtest games")
	if err != nil {
		fmt.Fprintln(stderr, "palace loadtest games:", err)
		return exitUsage
	}
	n := *conns
	if n <= 0 {
		n = *games/100 + 1
	}
	if *games > maxGamesPerConn*n {
		// More would wait, unseen, for a server's room on the connection.
		fmt.Fprintf(stderr, "palace loadtest games: at most %d games per connection: each holds up to 4 calls and streams at once, and a server carries 4,096 per connection; raise --conns to at least %d\n", maxGamesPerConn, (*games+maxGamesPerConn-1)/maxGamesPerConn)
		return exitUsage
	}
	l := &gamesLoad{think: *think, warmup: *warmup, silence: *silence, retryUnavailable: *retryUnavailable}
	var seedN atomic.Uint64
	l.rng = func() *rand.Rand { return rand.New(rand.NewPCG(*seed, seedN.Add(1))) }
	replicas, ccs, err := replicaClients(tr, *addr, n, gamev1.NewGameServiceClient,
		grpc.WithConnectParams(quickReconnect), grpc.WithUnaryInterceptor(withTimeout(*callTimeout)), service)
	if err != nil {
		fmt.Fprintln(stderr, "palace loadtest games:", err)
		return exitUsage
	}
	defer closeAll(ccs)
	l.replicas = replicas
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "palace loadtest games:", err)
			return exitUsage
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "palace loadtest games:", err)
			return exitFail
		}
		defer pprof.StopCPUProfile()
	}
	var rep gamesReport
	var floors []floorRun
	measureFloor := func(when string) {
		fmt.Fprintf(stderr, "floor %s the games: %d clients calling Probe for %v\n", when, *games, *duration/2)
		f := l.floor(ctx, *games, *duration/2)
		p50, p99 := percentiles(f.lat)
		fmt.Fprintf(stderr, "floor %s the games: %.0f calls/s, p50 %.2f ms, p99 %.2f ms\n", when, f.perS(), p50, p99)
		floors = append(floors, f)
	}
	if *floor {
		measureFloor("before")
	}
	fmt.Fprintf(stderr, "games: %d concurrent games for %v\n", *games, *duration)
	pctx, stop := context.WithTimeout(ctx, *duration)
	defer stop()
	l.play = pctx
	progress := time.NewTicker(5 * time.Second)
	defer progress.Stop()
	var wg sync.WaitGroup
	l.started = time.Now()
	for i := range *games {
		wg.Go(func() { l.table(pctx, ctx, i, *retryRate, *reconnectRate) })
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
loop:
	for {
		select {
		case <-finished:
			break loop
		case <-progress.C:
			el := time.Since(l.started).Seconds()
			fmt.Fprintf(stderr, "progress: %.0fs games=%d moves=%d (%.0f/s) errors=%d lost=%d dup=%d gaps=%d failovers=%d\n",
				el, l.games.Load(), l.moves.Load(), float64(l.moves.Load())/el, l.errs.Load(), l.lost.Load(), l.dup.Load(), l.gaps.Load(), l.failovers.Load())
		}
	}
	elapsed := min(time.Since(l.started), *duration)
	if *floor {
		measureFloor("after")
		all := floorRun{calls: floors[0].calls + floors[1].calls, secs: floors[0].secs + floors[1].secs, lat: append(floors[0].lat, floors[1].lat...)}
		rep.FloorPerS, rep.FloorBeforePerS, rep.FloorAfterPerS = all.perS(), floors[0].perS(), floors[1].perS()
		rep.FloorP50ms, rep.FloorP99ms = percentiles(all.lat)
	}
	rep.Games, rep.Moves, rep.WarmupS = l.games.Load(), l.moves.Load(), l.warmup.Seconds()
	rep.JanggiGames, rep.XiangqiGames = l.kindGames[0].Load(), l.kindGames[1].Load()
	rep.JanggiMoves, rep.XiangqiMoves = l.kindMoves[0].Load(), l.kindMoves[1].Load()
	if secs := (elapsed - l.warmup).Seconds(); secs > 0 {
		// (Interrupted during the warm-up, nothing was measured.)
		rep.MovesPerS = float64(l.measured.Load()) / secs
	}
	rep.P50ms, rep.P99ms = percentiles(l.lat)
	if len(l.lat) > 0 {
		rep.MaxMs = float64(l.lat[len(l.lat)-1].Microseconds()) / 1000 // sorted by percentiles
	}
	rep.Interrupted = ctx.Err() != nil
	rep.EventP50ms, rep.EventP99ms = percentiles(l.eventLat)
	rep.Lost, rep.Duplicated, rep.Gaps, rep.Errors = l.lost.Load(), l.dup.Load(), l.gaps.Load(), l.errs.Load()
	rep.Retries, rep.Reconnects, rep.Failovers, rep.Renewed = l.retries.Load(), l.reconnects.Load(), l.failovers.Load(), l.renewed.Load()
	if rep.FloorPerS > 0 {
		rep.Ratio = rep.MovesPerS / rep.FloorPerS
	}
	for _, e := range l.err {
		fmt.Fprintln(stderr, "error:", e)
	}
	unplayed := rep.unplayed()
	if unplayed != "" {
		fmt.Fprintln(stderr, "palace loadtest games:", unplayed)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		fmt.Fprintln(stderr, "palace loadtest games: report:", err)
		return exitFail
	}
	fmt.Fprintln(stdout, string(b))
	if rep.Lost+rep.Duplicated+rep.Gaps+rep.Errors > 0 || rep.Interrupted || unplayed != "" {
		// The report stands; the exit status lets a script see the faults.
		return exitFail
	}
	return exitOK
}

// unplayed says what a run that counted no fault still failed to test:
// all zeros from a server that plays no move, or only one kind, would
// read as a pass.
func (r gamesReport) unplayed() string {
	switch {
	case r.Interrupted:
		return ""
	case r.Moves == 0:
		return fmt.Sprintf("no move was acknowledged in %d games, so nothing was tested (a --think longer than --duration, or a server that ends or refuses every game)", r.Games)
	case r.Games >= 2 && r.JanggiGames == 0:
		return fmt.Sprintf("none of the %d games was a Janggi game", r.Games)
	case r.Games >= 2 && r.XiangqiGames == 0:
		return fmt.Sprintf("none of the %d games was a Xiangqi game", r.Games)
	// A kind with games but no move, where the other kind's games had
	// time for a few each: its games ended or stalled at their start.
	case r.JanggiGames > 0 && r.JanggiMoves == 0 && r.XiangqiGames > 0 && r.XiangqiMoves >= 2*r.XiangqiGames:
		return fmt.Sprintf("no move was acknowledged in the %d Janggi games, while the %d Xiangqi games had %d", r.JanggiGames, r.XiangqiGames, r.XiangqiMoves)
	case r.XiangqiGames > 0 && r.XiangqiMoves == 0 && r.JanggiGames > 0 && r.JanggiMoves >= 2*r.JanggiGames:
		return fmt.Sprintf("no move was acknowledged in the %d Xiangqi games, while the %d Janggi games had %d", r.XiangqiGames, r.JanggiGames, r.JanggiMoves)
	}
	return ""
}

func percentiles(lat []time.Duration) (p50, p99 float64) {
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(quantile(lat, q).Microseconds()) / 1000 }
	return at(0.50), at(0.99)
}

// pause waits a random think time, so a paced run measures latency below
// saturation rather than queueing.
func (l *gamesLoad) pause(ctx context.Context, rng *rand.Rand) {
	if l.think <= 0 {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(rng.Int64N(int64(2 * l.think)))):
	}
}

// floorRun is one measurement of the floor, warm-up left out.
type floorRun struct {
	calls int64
	secs  float64
	lat   []time.Duration
}

func (f floorRun) perS() float64 { return float64(f.calls) / f.secs }

// floor runs the same number of clients against Probe, paced alike.
func (l *gamesLoad) floor(ctx context.Context, clients int, d time.Duration) floorRun {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var mu sync.Mutex
	var all []time.Duration
	var count atomic.Int64
	var wg sync.WaitGroup
	run := "floor" + strconv.FormatInt(time.Now().UnixNano(), 36)
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			// A key for each client, as each game has its own: one key for
			// all would put the whole floor on one Redis Cluster slot.
			key := run + "-" + strconv.Itoa(i)
			// Routed like a game, so that a replica that is down sends
			// its floor calls to the next one as it sends the games.
			r := l.route(i)
			rng := l.rng()
			var mine []time.Duration
			// Paced clients arrive spread over a think time, as players do,
			// not all in the first millisecond.
			l.pause(ctx, rng)
			for ctx.Err() == nil {
				t := time.Now()
				if _, err := onReplicas(ctx, r, func(c gamev1.GameServiceClient) (*gamev1.ProbeResponse, error) {
					return c.Probe(ctx, &gamev1.ProbeRequest{Key: key})
				}); err != nil {
					if runEnded(ctx, err) {
						break
					}
					l.fail("probe: %v", err)
					// Not at once again: a server that refuses every call
					// would have the clients spin.
					select {
					case <-ctx.Done():
					case <-time.After(failoverPauseMax):
					}
					continue
				}
				if t.Sub(start) >= l.warmup {
					mine = append(mine, time.Since(t))
					count.Add(1)
				}
				l.pause(ctx, rng)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return floorRun{calls: count.Load(), secs: (time.Since(start) - l.warmup).Seconds(), lat: all}
}

// table plays games one after another in one slot until play ends.
func (l *gamesLoad) table(play, all context.Context, slot int, retryRate, reconnectRate float64) {
	rng := l.rng()
	r := l.route(slot)
	l.pause(play, rng)
	for n := 0; play.Err() == nil; n++ {
		// Kinds alternate, rather than being drawn, so that any two games
		// are one of each.
		kind := commonv1.GameKind_GAME_KIND_XIANGQI
		var start *commonv1.Position
		if (slot+n)%2 == 0 {
			kind = commonv1.GameKind_GAME_KIND_JANGGI
			// Skip the setup phase: the load is on moves.
			start = &commonv1.Position{Fen: janggiStart}
		}
		if !l.playGame(play, all, r, rng, kind, start, fmt.Sprintf("lt-%d-%d-%d", time.Now().UnixNano(), slot, n), retryRate, reconnectRate) {
			// Not at once again: a server that refuses every creation
			// would have the slots spin, as the floor's clients would.
			select {
			case <-play.Done():
			case <-time.After(failoverPauseMax):
			}
		}
	}
}

// janggiStart is a Janggi start position with both formations chosen, so
// that a game starts at once, with its first move.
const janggiStart = "rnba1abnr/4k4/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/4K4/RNBA1ABNR w - - 0 1"

// kindIndex is the index of kind in the counters by kind, -1 for none.
func kindIndex(kind commonv1.GameKind) int {
	switch kind {
	case commonv1.GameKind_GAME_KIND_JANGGI:
		return 0
	case commonv1.GameKind_GAME_KIND_XIANGQI:
		return 1
	}
	return -1
}

type played struct {
	ply  uint32
	move string
}

// seen is what the check needs of one streamed event; keeping only this,
// not the event, keeps the load tool's heap (and its GC) small.
type seen struct {
	version uint64
	played
	at time.Time
	// snapshot marks the state a stream sent first, at version; its moves
	// follow, each an entry of its own with inSnapshot set.
	snapshot, inSnapshot bool
	// ended marks the game's last event, or a snapshot of the game ended;
	// result is the result it gives.
	ended  bool
	result *commonv1.Result
	// commit is the event's, or the snapshot's; rec the move's record, of
	// an event or a snapshot; position the snapshot's. They are the
	// messages' own, not copies: the check holds them to the answers.
	commit   string
	rec      *gamev1.MoveRecord
	position *commonv1.Position
}

// sent is a measured move: when it was sent, and by which seat (0 first).
type sent struct {
	ply  uint32
	seat int
	at   time.Time
}

// route is the route of the games of one slot: they start on replica
// slot mod the number of replicas.
func (l *gamesLoad) route(slot int) *gameRoute {
	return &gameRoute{replicas: l.replicas, replica: slot % len(l.replicas), conn: slot / len(l.replicas), retry: l.retryUnavailable, moved: func() { l.failovers.Add(1) },
		renewed: func() { l.renewed.Add(1) }}
}

// retry is how a move is sent again with its request id, if at all.
type retry int

const (
	noRetry retry = iota
	// retryAtOnce sends it again once the first answer is in.
	retryAtOnce
	// retryAlongside sends it twice at once, as a client that gave up
	// on a slow call and sent it again on another connection does.
	retryAlongside
	// retryLater sends it again after the opponent's reply, or after the
	// game's end: an answer kept, not one made again from the game.
	retryLater
)

// sentBefore is a move to send again later, with its first answer.
type sentBefore struct {
	req    *gamev1.MakeMoveRequest
	side   commonv1.Side
	ply    uint32
	answer *gamev1.MakeMoveResponse
}

// playGame plays one game to its end, or until play ends and it resigns,
// then checks it; it reports whether the game was created.
func (l *gamesLoad) playGame(play, all context.Context, r *gameRoute, rng *rand.Rand, kind commonv1.GameKind, start *commonv1.Position, rid string, retryRate, reconnectRate float64) bool {
	createReq := &gamev1.CreateGameRequest{
		RequestId: rid, Kind: kind, Start: start,
		Seats: []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, PlayerId: "a"}, {Side: commonv1.Side_SIDE_SECOND, PlayerId: "b"}},
	}
	created, err := onReplicas(all, r, func(c gamev1.GameServiceClient) (*gamev1.CreateGameResponse, error) {
		return c.CreateGame(all, createReq)
	})
	if err != nil {
		l.failUnless(all, "create: %v", err)
		return false
	}
	l.games.Add(1)
	id := created.GetGameId()
	k := kindIndex(created.GetGame().GetKind())
	if got := created.GetGame().GetKind(); got != kind {
		l.fail("game %s was created as %v, asked for %v", id, got, kind)
	}
	if k >= 0 {
		l.kindGames[k].Add(1)
	}
	tokens := map[commonv1.Side]string{}
	for _, cr := range created.GetCredentials() {
		tokens[cr.GetSide()] = cr.GetToken()
	}
	as := func(ctx context.Context, side commonv1.Side) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tokens[side])
	}
	// Each seat streams the game, reconnecting at random.
	streams := make([]streamed, 2)
	var swg sync.WaitGroup
	watch, stopWatching := context.WithCancel(all)
	defer stopWatching()
	for i, side := range []commonv1.Side{commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND} {
		srng := l.rng()
		sr := *r
		swg.Go(func() { streams[i] = l.stream(watch, &sr, as(watch, side), id, srng, reconnectRate) })
	}
	g := created.GetGame()
	var acked []played
	// told is what the answers said, for the streams and the final state
	// to be held to.
	var tl told
	tl.state(g, 0)
	var measured []sent
	// unsure is the move whose call failed: it may have been applied all
	// the same, so finding it (that move, at that ply) is no fault.
	var unsure played
	// later is a move to send again once the game has moved on.
	var later *sentBefore
	// trusted: g is an answer the tool can hold the final state to (not
	// one of two answers to the same request that differ, a duplicate
	// counted already).
	trusted := true
	for play.Err() == nil && g.GetStatus() == commonv1.GameStatus_GAME_STATUS_ONGOING {
		legal := g.GetLegalMoves()
		if len(legal) == 0 {
			// A side to move in a game going on has a move (a Janggi
			// pass at least), or the game would have ended.
			l.fail("game %s is going on at version %d with no legal move for %v", id, g.GetVersion(), g.GetTurn())
			break
		}
		mv := legal[rng.IntN(len(legal))].GetCoordinate()
		// Every move of the game is played here, so plies are known.
		ply := uint32(len(acked) + 1)
		req := &gamev1.MakeMoveRequest{GameId: id, RequestId: fmt.Sprintf("%s-%d", rid, len(acked)), Move: &commonv1.Move{Coordinate: mv}}
		side := g.GetTurn()
		move := func(c gamev1.GameServiceClient) (*gamev1.MakeMoveResponse, error) {
			return c.MakeMove(as(all, side), req)
		}
		again := noRetry
		if rng.Float64() < retryRate {
			again = retry(1 + rng.IntN(3))
		}
		type answer struct {
			resp *gamev1.MakeMoveResponse
			err  error
		}
		var twin chan answer
		if again == retryAlongside {
			twin = make(chan answer, 1)
			tr := *r
			go func() {
				resp, err := onReplicas(all, &tr, move)
				twin <- answer{resp, err}
			}()
		}
		t := time.Now()
		resp, err := onReplicas(all, r, move)
		if err != nil {
			l.failUnless(all, "move %s in %s: %v", mv, id, err)
			unsure = played{ply: ply, move: mv}
			if twin != nil {
				if a := <-twin; a.err == nil {
					// Acknowledged all the same, to the call sent
					// alongside: it must be found like any other.
					acked = append(acked, played{ply: ply, move: mv})
					tl.answered(a.resp, ply, mv)
				}
			}
			break
		}
		echoed := true
		if got := resp.GetMove(); got.GetPly() != ply || got.GetMove().GetCoordinate() != mv {
			l.fail("move %s in %s was answered as ply %d %q, want ply %d", mv, id, got.GetPly(), got.GetMove().GetCoordinate(), ply)
			echoed = false
		}
		if t.Sub(l.started) >= l.warmup {
			l.mu.Lock()
			l.lat = append(l.lat, time.Since(t))
			l.mu.Unlock()
			if l.play.Err() == nil {
				l.measured.Add(1)
			}
			seat := 0
			if side != commonv1.Side_SIDE_FIRST {
				seat = 1
			}
			measured = append(measured, sent{ply: ply, seat: seat, at: t})
		}
		l.moves.Add(1)
		if k >= 0 {
			l.kindMoves[k].Add(1)
		}
		// What was sent, not the answer's echo of it: the check must find
		// the move asked for.
		acked = append(acked, played{ply: ply, move: mv})
		trusted = true
		switch again {
		case retryAtOnce:
			l.retries.Add(1)
			resent, err := onReplicas(all, r, move)
			l.sameAnswer(all, resp, resent, err, "move %s of %s sent again", mv, id)
		case retryAlongside:
			l.retries.Add(1)
			twin := <-twin
			// Which of the two the server took first is unknown: when
			// they differ, neither is held against the streams.
			trusted = l.sameAnswer(all, resp, twin.resp, twin.err, "move %s of %s sent twice at once", mv, id)
		case retryLater:
			if later == nil {
				later = &sentBefore{req: req, side: side, ply: ply, answer: resp}
			}
		}
		switch {
		case !trusted:
			tl.moves = append(tl.moves, toldMove{})
		case echoed:
			tl.answered(resp, ply, mv)
		default:
			// The game in the answer is the server's, its echo of the
			// move (counted already) is not.
			tl.moves = append(tl.moves, toldMove{})
			tl.state(resp.GetGame(), -1)
		}
		if later != nil && ply > later.ply {
			l.sendAgain(all, r, as, later)
			later = nil
		}
		g = resp.GetGame()
		l.pause(play, rng)
	}
	end := g
	resigned := false
	if st := g.GetStatus(); st != commonv1.GameStatus_GAME_STATUS_ENDED && st != commonv1.GameStatus_GAME_STATUS_ABORTED {
		// End the game so both streams complete (an answer without the
		// game, from a faulty server, leaves it to end here too).
		resign := &gamev1.ResignRequest{GameId: id, RequestId: rid + "-resign"}
		resignedResp, err := onReplicas(all, r, func(c gamev1.GameServiceClient) (*gamev1.ResignResponse, error) {
			return c.Resign(as(all, commonv1.Side_SIDE_FIRST), resign)
		})
		end, trusted = resignedResp.GetGame(), true
		if err != nil {
			l.failUnless(all, "resign %s: %v", id, err)
			// The streams wait for an end that will not come.
			stopWatching()
		} else {
			// A move whose call failed may have ended the game first.
			resigned = unsure.ply == 0
			plies := len(acked)
			if unsure.ply != 0 {
				plies = -1
			}
			tl.state(end, plies)
		}
	}
	if later != nil {
		// After the end, the answer is still the first one.
		l.sendAgain(all, r, as, later)
	}
	streamsDone := make(chan struct{})
	go func() { swg.Wait(); close(streamsDone) }()
	// A stream cut off silently resumes elsewhere after --stream-silence,
	// and must still have time to deliver the end.
	wait := streamEndWait + l.silence
	select {
	case <-streamsDone:
	case <-time.After(wait):
		// A server that never ends a stream must not hang the run.
		l.fail("the streams of %s did not end within %v of the game", id, wait)
		stopWatching()
		<-streamsDone
	}
	read, err := onReplicas(all, r, func(c gamev1.GameServiceClient) (*gamev1.GetGameResponse, error) {
		return c.GetGame(as(all, commonv1.Side_SIDE_FIRST), &gamev1.GetGameRequest{GameId: id})
	})
	// final stays nil when the read failed: the streams are checked all
	// the same, against each other and the answers, for all that does not
	// need the final state.
	var final *gamev1.Game
	switch {
	case status.Code(err) == codes.NotFound:
		// The game is gone, and every move acknowledged in it with it.
		l.fail("final state of %s: %v", id, err)
		l.lost.Add(int64(len(acked)))
	case err != nil:
		l.failUnless(all, "final state of %s: %v", id, err)
	default:
		final = read.GetGame()
		if end != nil && !agrees(final, end, trusted) {
			l.fail("game %s ended %v %v at version %d (commit %q, position %q), where the answer that ended it said %v %v at version %d (commit %q, position %q)", id,
				final.GetStatus(), final.GetResult(), final.GetVersion(), final.GetCommit(), final.GetPosition().GetFen(),
				end.GetStatus(), end.GetResult(), end.GetVersion(), end.GetCommit(), end.GetPosition().GetFen())
		}
	}
	if resigned {
		// The first seat resigned: whatever else the server says, the
		// second seat won, by resignation.
		over := final
		if over == nil {
			over = end
		}
		if res := over.GetResult(); res.GetWinner() != commonv1.Winner_WINNER_SECOND || res.GetMethod() != commonv1.EndMethod_END_METHOD_RESIGNATION {
			l.fail("the first seat of %s resigned, and the game's result is %v", id, res)
		}
	}
	l.check(final, acked, unsure, streams)
	l.checkTold(id, &tl, final, streams)
	l.timeEvents(measured, streams)
	return true
}

// agrees reports whether the final state of a game is the one the answer
// that ended it gave: its status and result, and, when the answer can be
// trusted, its version, commit and position.
func agrees(final, end *gamev1.Game, trusted bool) bool {
	if final.GetStatus() != end.GetStatus() || !proto.Equal(final.GetResult(), end.GetResult()) {
		return false
	}
	return !trusted || final.GetVersion() == end.GetVersion() && final.GetCommit() == end.GetCommit() &&
		proto.Equal(final.GetPosition(), end.GetPosition())
}

// sameAnswer checks the answer to a request sent again against the first:
// a retry must get the first answer, whole, or it was applied again.
// It reports whether the two answers are the same.
func (l *gamesLoad) sameAnswer(all context.Context, first, again *gamev1.MakeMoveResponse, err error, format string, a ...any) bool {
	switch {
	case err != nil:
		l.failUnless(all, format+": %v", append(a, err)...)
	case !proto.Equal(again, first):
		l.dup.Add(1)
		return false
	}
	return true
}

// sendAgain sends a move of before again, as a client whose answer got
// lost does when it finally gets through.
func (l *gamesLoad) sendAgain(all context.Context, r *gameRoute, as func(context.Context, commonv1.Side) context.Context, before *sentBefore) {
	l.retries.Add(1)
	resent, err := onReplicas(all, r, func(c gamev1.GameServiceClient) (*gamev1.MakeMoveResponse, error) {
		return c.MakeMove(as(all, before.side), before.req)
	})
	l.sameAnswer(all, before.answer, resent, err, "move %s of %s (ply %d) sent again later", before.req.GetMove().GetCoordinate(), before.req.GetGameId(), before.ply)
}

// streamEndWait bounds the wait for a game's streams to deliver its end,
// longer than any failover that --retry-unavailable rides out.
const streamEndWait = 30 * time.Second

// timeEvents records, for each measured move, how long its event took to
// reach the opponent's stream.
func (l *gamesLoad) timeEvents(measured []sent, streams []streamed) {
	var arrived [2]map[uint32]time.Time
	for i, st := range streams {
		arrived[i] = map[uint32]time.Time{}
		for _, e := range st.events {
			if _, ok := arrived[i][e.ply]; e.move != "" && !ok {
				arrived[i][e.ply] = e.at
			}
		}
	}
	lat := make([]time.Duration, 0, len(measured))
	for _, m := range measured {
		// A move that never arrived is counted as lost by check.
		if at, ok := arrived[1-m.seat][m.ply]; ok {
			lat = append(lat, at.Sub(m.at))
		}
	}
	l.mu.Lock()
	l.eventLat = append(l.eventLat, lat...)
	l.mu.Unlock()
}

// check compares what was acknowledged with the final state and with what
// each stream delivered: an acknowledged move missing from either, or
// found there as another move, is lost; a ply found twice, or a move
// nobody acknowledged (but unsure, the move whose call failed), is
// duplicated; a list of moves out of order, or anything a stream sent
// after the game's end, is a gap. The move whose call failed may stand or
// not, but the final state and the streams must agree on it. A stream
// that did not end as a stream should (it failed: an error counted
// already) is checked for what it delivered only. A nil final (its read
// failed) leaves out what needs it, and only that.
func (l *gamesLoad) check(final *gamev1.Game, acked []played, unsure played, streams []streamed) {
	ackedAt := make(map[uint32]string, len(acked))
	for _, a := range acked {
		ackedAt[a.ply] = a.move
	}
	// record adds a move found to moves, counting it if it is one too many
	// or not the one acknowledged at its ply.
	record := func(moves map[uint32]string, p played) {
		want, known := ackedAt[p.ply]
		switch _, twice := moves[p.ply]; {
		case twice:
			l.dup.Add(1)
		case known && p.move != want:
			l.lost.Add(1)
		case !known && p != unsure:
			// Plies count from 1: a zero unsure is no failed call.
			l.dup.Add(1)
		}
		moves[p.ply] = p.move
	}
	stored := map[uint32]string{}
	if final != nil {
		disordered := false
		for i, m := range final.GetMoves() {
			if m.GetPly() != uint32(i+1) && !disordered {
				l.gaps.Add(1) // once per list
				disordered = true
			}
			record(stored, played{ply: m.GetPly(), move: m.GetMove().GetCoordinate()})
		}
		for _, a := range acked {
			if _, ok := stored[a.ply]; !ok {
				l.lost.Add(1)
			}
		}
	}
	storedUnsure := unsure.ply != 0 && stored[unsure.ply] == unsure.move
	for _, st := range streams {
		got := map[uint64]bool{}
		moves := map[uint32]string{}
		var next uint64 = 1
		// lastPly is the latest move the stream sent, in its events or its
		// snapshots: the next move it sends must be the one after it.
		// inSnapshot holds the plies of the latest snapshot.
		var lastPly uint32
		inSnapshot := map[uint32]bool{}
		// listed counts the moves of the latest snapshot, which must list
		// them in order; over is set by the game's end, after which the
		// stream must send nothing (counted once, as a gap).
		var listed uint32
		disordered, over, afterEnd := false, false, false
		for _, e := range st.events {
			v := e.version
			if e.ended && final != nil && !proto.Equal(e.result, final.GetResult()) {
				l.fail("a stream of %s ended the game with %v, its final state has %v", final.GetGameId(), e.result, final.GetResult())
			}
			if over && !e.inSnapshot && !afterEnd {
				l.gaps.Add(1)
				afterEnd = true
			}
			over = over || e.ended
			switch {
			case e.snapshot:
				listed, disordered = 0, false
				if v+1 < next {
					// Behind what the stream had sent already: counted
					// once, and the events that follow are judged by
					// what it had sent.
					l.gaps.Add(1)
				} else {
					next = v + 1
				}
				clear(inSnapshot)
				continue
			case e.inSnapshot:
				if listed++; e.ply != listed && !disordered {
					l.gaps.Add(1) // once per snapshot
					disordered = true
				}
				// A move the stream sent before is in its snapshots too,
				// but once in each.
				if m, ok := moves[e.ply]; !ok {
					record(moves, e.played)
				} else if m != e.move {
					l.fail("a snapshot of %s has %s at ply %d, where its stream sent %s", final.GetGameId(), e.move, e.ply, m)
				} else if inSnapshot[e.ply] {
					l.dup.Add(1)
				}
				inSnapshot[e.ply] = true
				lastPly = max(lastPly, e.ply)
				continue
			case got[v]:
				l.dup.Add(1)
				continue // counted once, as the repeated version
			case v != next:
				l.gaps.Add(1)
			case e.move != "" && e.ply != lastPly+1 && moves[e.ply] == "":
				// The versions in order, the moves not: an app replaying
				// the events would build another game. (A ply sent again
				// is counted as duplicated, below.)
				l.gaps.Add(1)
			}
			got[v] = true
			next = v + 1
			if e.move != "" {
				record(moves, e.played)
				lastPly = max(lastPly, e.ply)
			}
		}
		shownUnsure := unsure.ply != 0 && moves[unsure.ply] == unsure.move
		if final != nil && shownUnsure && !storedUnsure {
			l.dup.Add(1) // shown a move the game does not have
		}
		if !st.complete {
			continue
		}
		if final != nil && next-1 != final.GetVersion() {
			l.gaps.Add(1)
		}
		for _, a := range acked {
			if _, ok := moves[a.ply]; !ok {
				l.lost.Add(1)
			}
		}
		if storedUnsure && !shownUnsure {
			l.lost.Add(1)
		}
	}
}

// streamed is what one seat's stream delivered; complete when it ended as
// a stream should: closed by the server with OK, at the game's end.
type streamed struct {
	events   []seen
	complete bool
}

const (
	// defaultStreamSilence is --stream-silence's default: three of the
	// game service's default --heartbeat intervals (15 s), so that a
	// heartbeat late behind a busy server is no fault.
	defaultStreamSilence = 45 * time.Second
	// closeWait bounds the wait for a stream to close after the game's
	// end, which a server does at once.
	closeWait = 5 * time.Second
)

// stream reads a game's events until it ends, reconnecting at random from
// the last version seen, and on another replica when its own is
// unavailable or silent.
func (l *gamesLoad) stream(ctx context.Context, r *gameRoute, seat context.Context, id string, rng *rand.Rand, reconnectRate float64) streamed {
	var out []seen
	var last uint64
	// The commit of version last, which the server checks a resume against:
	// a stream that resumed onto a history other than the one it had would
	// pass this tool's checks.
	var commit string
	failovers := 0
	// over: the stream sent the game's end, after which it must close,
	// sending nothing more.
	over := false
	for ctx.Err() == nil {
		sctx, cancel := context.WithCancel(seat)
		// A server beats after each --heartbeat of silence, so a stream
		// that hears nothing much longer is cut off, though its connection
		// may stay open (a partition, a frozen host): no error would ever
		// come. quiet ends it then, and silent tells why.
		var silent atomic.Bool
		quiet := time.AfterFunc(l.silence, func() {
			silent.Store(true)
			cancel()
		})
		// Half the connections ask for the game's state first, as an app
		// opening a game's screen does.
		snapshot := rng.IntN(2) == 0
		st, err := r.client().StreamEvents(sctx, &gamev1.StreamEventsRequest{GameId: id, AfterVersion: last, AfterCommit: commit, Snapshot: snapshot})
		if err != nil {
			quiet.Stop()
			cancel()
			if l.resumeAfter(ctx, r, id, err, silent.Load(), &failovers) {
				continue
			}
			return streamed{events: out}
		}
		reconnect := false
		for first := true; !reconnect; first = false {
			m, err := st.Recv()
			if err != nil {
				quiet.Stop()
				cancel()
				switch {
				case errors.Is(err, io.EOF):
					return streamed{events: out, complete: true}
				case over && silent.Load():
					l.fail("stream %s did not close within %v of the game's end", id, min(l.silence, closeWait))
					return streamed{events: out, complete: true}
				case over:
					// The end came whole; a replica going away after it is
					// no fault, any other failure is.
					if ctx.Err() == nil && status.Code(err) != codes.Unavailable && !server.Renewed(err) {
						l.fail("stream %s failed after the game's end: %v", id, err)
					}
					return streamed{events: out, complete: true}
				case l.resumeAfter(ctx, r, id, err, silent.Load(), &failovers):
					// The outer loop resumes after last.
				default:
					return streamed{events: out}
				}
				break
			}
			if over {
				quiet.Reset(min(l.silence, closeWait))
			} else {
				quiet.Reset(l.silence)
			}
			failovers = 0
			if snapshot && first && m.GetSnapshot() == nil {
				l.fail("stream %s asked for a snapshot began with %T instead", id, m.GetMessage())
			}
			if g := m.GetSnapshot(); g != nil {
				if !snapshot || !first {
					l.fail("stream %s sent a snapshot unasked, or after its first message", id)
				}
				at := time.Now()
				s := seen{version: g.GetVersion(), snapshot: true, at: at, commit: g.GetCommit(), position: g.GetPosition()}
				if st := g.GetStatus(); st == commonv1.GameStatus_GAME_STATUS_ENDED || st == commonv1.GameStatus_GAME_STATUS_ABORTED {
					s.ended, s.result = true, g.GetResult()
				}
				out = append(out, s)
				for _, mr := range g.GetMoves() {
					out = append(out, seen{version: g.GetVersion(), inSnapshot: true, at: at, rec: mr,
						played: played{ply: mr.GetPly(), move: mr.GetMove().GetCoordinate()}})
				}
				last, commit = g.GetVersion(), g.GetCommit()
				continue
			}
			if hb := m.GetHeartbeat(); hb != nil {
				switch {
				case over:
					l.fail("stream %s beat after the game's end", id)
				case hb.GetVersion() != last:
					// A heartbeat says where the stream is: at the last
					// version it sent, or at the one it resumed after.
					l.fail("stream %s beat at version %d, after sending up to %d", id, hb.GetVersion(), last)
				}
			}
			e := m.GetEvent()
			if e == nil {
				continue
			}
			s := seen{version: e.GetVersion(), at: time.Now(), commit: e.GetCommit()}
			switch k := e.GetKind().(type) {
			case *gamev1.Event_MovePlayed:
				s.rec = k.MovePlayed
				s.played = played{ply: k.MovePlayed.GetPly(), move: k.MovePlayed.GetMove().GetCoordinate()}
			case *gamev1.Event_GameEnded:
				s.ended, s.result = true, k.GameEnded.GetResult()
			case *gamev1.Event_GameCreated, *gamev1.Event_GameStarted, *gamev1.Event_PlayerConnection, *gamev1.Event_Clock:
			default:
				// The tool offers no draw, undoes nothing, and starts its
				// Janggi games from a position with both formations set:
				// such an event is one the server made up.
				l.fail("stream %s sent at version %d an event of a kind nothing in this run causes: %T", id, e.GetVersion(), e.GetKind())
			}
			out = append(out, s)
			last, commit = e.GetVersion(), e.GetCommit()
			if s.ended {
				// The stream must close now: anything more it sends is
				// counted (by check, for events).
				over = true
				quiet.Reset(min(l.silence, closeWait))
				continue
			}
			reconnect = !over && rng.Float64() < reconnectRate
		}
		quiet.Stop()
		cancel()
		if reconnect {
			l.reconnects.Add(1)
		}
	}
	return streamed{events: out}
}

// resumeAfter reports whether a stream that failed with err, or that was
// silent past --stream-silence, is to resume, on the next replica; it
// counts the failure when not. A silent stream is treated as one whose
// replica is unavailable: it moves on when there is another replica, and
// is an error with one (the same one would be as silent).
func (l *gamesLoad) resumeAfter(ctx context.Context, r *gameRoute, id string, err error, silent bool, failovers *int) bool {
	switch {
	case silent && ctx.Err() == nil:
		if len(r.replicas) > 1 && r.moveOn(ctx, *failovers) {
			*failovers++
			return true
		}
		if ctx.Err() == nil {
			l.fail("stream %s heard nothing, not even a heartbeat, for %v (--stream-silence)", id, l.silence)
		}
	case r.failover(ctx, err, *failovers):
		*failovers++
		return true
	case ctx.Err() == nil || status.Code(err) != codes.Canceled:
		// Cancelled is expected only when the tool itself ended the
		// stream; from the server it is a fault like any other.
		l.fail("stream %s: %v", id, err)
	}
	return false
}
