package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
)

// clocksReport is the clock load test's result, printed as its last line.
type clocksReport struct {
	Games int64 `json:"games"`
	// Checked games were read back after their flag instant and judged;
	// the others (a failed call, or the run's --timeout ending first)
	// were never checked, which is a fault: nothing was shown of them.
	Checked int64 `json:"checked"`
	// Flagged games ended on time, at or after their flag instant.
	Flagged int64 `json:"flagged"`
	// Missed games were still running CheckAfter past their flag instant.
	Missed int64 `json:"missed"`
	// WronglyFlagged games were flagged before their flag instant, or
	// flagged for the side whose move had been accepted in time.
	WronglyFlagged int64 `json:"wrongly_flagged"`
	// Excused flags: a storage outage in the flagged turn was excused
	// (OUTAGE_EXCUSED), which moved its flag instant later by as much; the
	// game is checked, judged and its lateness measured from that instant.
	Excused int64 `json:"excused"`
	// Lateness (game-ended commit time minus flag instant) of the flags
	// only the clock service could have made: no move was sent at or
	// after the instant. Missed games flagged by the end of the run count
	// with their real delay.
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// Behaviours: never move again, move well in time, move just before
	// (or just after) the deadline.
	Idle   int64 `json:"idle"`
	Early  int64 `json:"early"`
	Racing int64 `json:"racing"`
	// Racing moves accepted in time / refused as too late.
	RaceInTime int64 `json:"race_in_time"`
	RaceLate   int64 `json:"race_late"`
	// Inconsistent: a move's answer disagrees with the game's final state
	// (accepted but absent, refused but present, accepted after its
	// deadline and any storage outage its turn was excused).
	Inconsistent int64 `json:"inconsistent"`
	// Unexpected: ended other than on time (aborted, resigned, ...).
	Unexpected int64 `json:"unexpected"`
	// Errors: failed calls (create, moves, reads).
	Errors int64 `json:"errors"`
	// Retries counts calls and streams sent again, with the same request
	// id, because their replica answered Unavailable (gone, restarting, out
	// of Redis's reach, its connection renewed) or, with several, held a
	// call past --call-timeout: ridden through, as an app would, not errors.
	Retries int64   `json:"retries"`
	SetupS  float64 `json:"setup_s"`
	RunS    float64 `json:"run_s"`
}

// faulty tells whether the report shows a fault: a clock that failed,
// or a run that could not show that none did.
func (r clocksReport) faulty() bool {
	return r.Missed > 0 || r.WronglyFlagged > 0 || r.Inconsistent > 0 ||
		r.Unexpected > 0 || r.Errors > 0 || r.Checked < r.Games
}

type clocksOptions struct {
	games            int
	spread           time.Duration
	minMain, maxMain time.Duration
	early, racing    float64
	byoyomi          float64
	raceBefore       time.Duration
	raceAfter        time.Duration
	reportedLag      time.Duration
	checkAfter       time.Duration
	concurrency      int
}

// clockGame is one game of the test and what the tool did with it.
type clockGame struct {
	id        string
	tokens    map[commonv1.Side]string
	behaviour string
	// deadline is the first side's last in-time instant once its clock
	// runs; deadline2 the second side's after an accepted third move.
	// Both include the server's lag grace.
	deadline, deadline2 time.Time
	// budget is the time control's whole budget (main time plus periods);
	// grace what the server adds for lag (deadline = start + budget +
	// grace); limit the last instant at which the third move, with the
	// lag it reported, is in time.
	budget, grace, limit time.Duration
	// moveSent: a third move was sent; answer: accepted, refused (too
	// late) or unknown (the call failed).
	moveSent bool
	accepted bool
	refused  bool
	playedAt time.Time
	// refusedAt is when the refusal of the third move came back (local).
	refusedAt time.Time
	// streamEnd is the result the game's stream ended it with, when read.
	streamEnd *commonv1.Result
}

type clocksLoad struct {
	opt clocksOptions
	// replicas holds the connections to each replica of the game service.
	replicas [][]gamev1.GameServiceClient
	runID    string
	// offset is server time minus local time, from the fastest round
	// trip seen: moves are aimed at server instants.
	offMu  sync.Mutex
	offRTT time.Duration
	offset time.Duration

	setupDone, started, checked                 atomic.Int64
	flagged, missed, wrong, inconsistent, unexp atomic.Int64
	excused                                     atomic.Int64
	raceIn, raceLate, errs, retries             atomic.Int64

	mu          sync.Mutex
	missedGames []*clockGame
	lateness    []float64
	slowest     []slowFlag
	errText     []string
}

// slowFlag is one of the latest flags, printed to help find the cause.
type slowFlag struct {
	id, behaviour string
	lateMs        float64
	flagAt        time.Time
}

// fail counts a failed call and keeps its text.
func (l *clocksLoad) fail(format string, a ...any) {
	l.errs.Add(1)
	l.note(format, a...)
}

// note keeps the text of one of the first problems found, for stderr.
func (l *clocksLoad) note(format string, a ...any) {
	l.mu.Lock()
	if len(l.errText) < 10 {
		l.errText = append(l.errText, fmt.Sprintf(format, a...))
	}
	l.mu.Unlock()
}

// runLoadtestClocks checks the clock service end to end through the
// public game API only: games with short clocks whose second first move
// (which starts the clock) is spread over --spread, then per game one of
// three behaviours: never move again (must flag at the deadline), move
// well in time, or move around the deadline (in time and the game goes
// on, or too late and the game ended on time; never both, never neither).
// Each game is read back --check-after past the instant it must have
// flagged by; lateness is the game's recorded end minus that instant.
func runLoadtestClocks(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("palace loadtest clocks", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "localhost:8080", "game service host:port: the tool calls only the game service, whose deadlines a clock service of the same deployment must sweep; several, comma-separated, are replicas: the games are spread over them, and a call whose replica is unavailable goes to the next one, with the same request id")
	var o clocksOptions
	fs.IntVar(&o.games, "games", 1000, "games to create")
	fs.DurationVar(&o.spread, "spread", 30*time.Second, "the clocks start (second moves) spread over this long, so flags spread likewise")
	fs.DurationVar(&o.minMain, "min-time", 2*time.Second, "shortest time budget of a game (main time plus periods)")
	fs.DurationVar(&o.maxMain, "max-time", 6*time.Second, "longest time budget of a game")
	app.FiniteFloatVar(fs, &o.early, "early", 0.2, "share of games whose first side moves well in time (then the other side never moves)")
	app.FiniteFloatVar(fs, &o.racing, "racing", 0.3, "share of games whose first side moves just around its deadline")
	app.FiniteFloatVar(fs, &o.byoyomi, "byoyomi", 0.3, "share of byo-yomi games (the rest are Fischer)")
	fs.DurationVar(&o.raceBefore, "race-before", 150*time.Millisecond, "racing moves are aimed up to this long before the deadline")
	fs.DurationVar(&o.raceAfter, "race-after", 30*time.Millisecond, "... and up to this long after it (those must be refused)")
	fs.DurationVar(&o.reportedLag, "reported-lag", 10*time.Second, "lag reported with racing moves: the server credits at most its lag grace, so a large report makes the move race the very deadline the sweeper flags after")
	fs.DurationVar(&o.checkAfter, "check-after", 2*time.Second, "a game still running this long after its flag instant counts as missed; in a trial that stops a clock replica or its game service, set it above the hand-over time (--clock-hand-over-after plus a lease, about 4 s by default)")
	fs.IntVar(&o.concurrency, "concurrency", 64, "concurrent calls while creating games")
	conns := fs.Int("conns", 8, "client connections per replica")
	callTimeout := fs.Duration("call-timeout", 10*time.Second, "timeout of one call: an overloaded server fails calls instead of queueing them without end; with several replicas, a call that times out is sent again to the next one")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	seed := fs.Uint64("seed", 1, "random seed")
	serviceKeys := serviceKeysFlag(fs)
	getTransport := transportFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	tr, err := getTransport()
	if err != nil {
		fmt.Fprintf(stderr, "palace loadtest clocks: %v\n", err)
		return exitUsage
	}
	service, err := asService(*serviceKeys, "palace loadtest clocks")
	if err != nil {
		fmt.Fprintln(stderr, "palace loadtest clocks:", err)
		return exitUsage
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(stderr, "palace loadtest clocks:", err)
		return exitUsage
	}
	if *conns < 1 || *conns > 256 || *timeout <= 0 || *callTimeout <= 0 {
		fmt.Fprintln(stderr, "palace loadtest clocks: --conns must be 1..256, --timeout and --call-timeout positive")
		return exitUsage
	}
	l := &clocksLoad{opt: o, runID: randomHex(4)}
	replicas, ccs, err := replicaClients(tr, *addr, *conns, gamev1.NewGameServiceClient,
		grpc.WithConnectParams(quickReconnect), grpc.WithUnaryInterceptor(withTimeout(*callTimeout)), service)
	if err != nil {
		fmt.Fprintln(stderr, "palace loadtest clocks:", err)
		return exitUsage
	}
	defer closeAll(ccs)
	l.replicas = replicas
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rng := mrand.New(mrand.NewPCG(*seed, 0xc10c))

	fmt.Fprintf(stderr, "clocks: creating %d games at %s (run %s)\n", o.games, *addr, l.runID)
	t0 := time.Now()
	games := l.setup(ctx, rng, stderr)
	var rep clocksReport
	rep.SetupS = time.Since(t0).Seconds()
	if len(games) == 0 {
		fmt.Fprintln(stderr, "palace loadtest clocks: no game could be created")
		l.printErrors(stderr)
		// The last line is the report on every run, this one too.
		rep.Errors = l.errs.Load()
		b, _ := json.Marshal(rep)
		fmt.Fprintln(stdout, string(b))
		return exitFail
	}
	l.calibrate(ctx, l.route(0), games[0])
	fmt.Fprintf(stderr, "clocks: %d games ready in %.1fs (clock offset %v); clocks start over %v\n", len(games), rep.SetupS, l.serverOffset(), o.spread)

	t1 := time.Now()
	begin := t1.Add(500 * time.Millisecond)
	var wg sync.WaitGroup
	for i, g := range games {
		startAt := begin.Add(time.Duration(rng.Float64() * float64(o.spread)))
		raceOffset := time.Duration(rng.Float64()*float64(o.raceBefore+o.raceAfter)) - o.raceAfter
		r := l.route(i)
		wg.Go(func() { l.play(ctx, r, g, startAt, raceOffset) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	progress := time.NewTicker(5 * time.Second)
	defer progress.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-progress.C:
			fmt.Fprintf(stderr, "progress: %.0fs clocks started %d/%d, checked %d, flagged %d, missed %d, wrongly flagged %d, errors %d, retries %d\n",
				time.Since(t1).Seconds(), l.started.Load(), len(games), l.checked.Load(), l.flagged.Load(), l.missed.Load(), l.wrong.Load(), l.errs.Load(), l.retries.Load())
		}
	}
	rep.RunS = time.Since(t1).Seconds()
	if l.missed.Load() > 0 {
		fmt.Fprintf(stderr, "clocks: reading the %d missed games again for their real lateness\n", l.missed.Load())
		l.rereadMissed(ctx)
	}
	rep.Games, rep.Checked = int64(len(games)), l.checked.Load()
	rep.Flagged, rep.Missed, rep.WronglyFlagged, rep.Excused = l.flagged.Load(), l.missed.Load(), l.wrong.Load(), l.excused.Load()
	rep.Inconsistent, rep.Unexpected, rep.Errors = l.inconsistent.Load(), l.unexp.Load(), l.errs.Load()
	rep.RaceInTime, rep.RaceLate, rep.Retries = l.raceIn.Load(), l.raceLate.Load(), l.retries.Load()
	for _, g := range games {
		switch g.behaviour {
		case "idle":
			rep.Idle++
		case "early":
			rep.Early++
		case "racing":
			rep.Racing++
		}
	}
	rep.P50ms, rep.P99ms, rep.MaxMs = quantilesMs(l.lateness)
	l.printErrors(stderr)
	if unchecked := rep.Games - rep.Checked; unchecked > 0 {
		fmt.Fprintf(stderr, "palace loadtest clocks: %d of %d games were never checked\n", unchecked, rep.Games)
	}
	b, _ := json.Marshal(rep)
	fmt.Fprintln(stdout, string(b))
	if rep.faulty() {
		// The report stands; the exit status lets a script see the faults.
		return exitFail
	}
	return exitOK
}

func (o clocksOptions) validate() error {
	switch {
	case o.games < 1 || o.games > 100000:
		return fmt.Errorf("--games %d: want 1..100000", o.games)
	case o.spread <= 0 || o.spread > 10*time.Minute:
		return fmt.Errorf("--spread %v: want up to 10m", o.spread)
	case o.minMain < 2*time.Second || o.maxMain < o.minMain || o.maxMain > 10*time.Minute:
		return fmt.Errorf("--min-time %v / --max-time %v: want 2s <= min <= max <= 10m", o.minMain, o.maxMain)
	case o.early < 0 || o.racing < 0 || o.early+o.racing > 1 || o.byoyomi < 0 || o.byoyomi > 1:
		return fmt.Errorf("--early %v + --racing %v must be within 0..1, --byoyomi within 0..1", o.early, o.racing)
	case o.raceBefore < 0 || o.raceAfter < 0 || o.raceBefore+o.raceAfter == 0 || o.raceBefore > o.minMain/2:
		return fmt.Errorf("--race-before %v / --race-after %v: want a window, before at most half of --min-time", o.raceBefore, o.raceAfter)
	case o.reportedLag < 0 || o.reportedLag > clock.MaxReportedLag:
		// The server credits a report over the maximum nothing, as a
		// broken client's: the racing games would race another deadline
		// than the one this tool judges them by.
		return fmt.Errorf("--reported-lag %v: want 0..%v, the most the server credits", o.reportedLag, clock.MaxReportedLag)
	case o.checkAfter <= 0 || o.concurrency < 1:
		return fmt.Errorf("--check-after and --concurrency must be positive")
	}
	return nil
}

func (l *clocksLoad) printErrors(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.slowest {
		fmt.Fprintf(w, "slowest flag: game %s (%s) %.0f ms after %s\n", f.id, f.behaviour, f.lateMs, f.flagAt.UTC().Format("15:04:05.000"))
	}
	for _, e := range l.errText {
		fmt.Fprintln(w, "error:", e)
	}
}

// setup creates the games and plays their first moves; clocks start
// only after both first moves, so none runs yet.
func (l *clocksLoad) setup(ctx context.Context, rng *mrand.Rand, stderr io.Writer) []*clockGame {
	type job struct {
		i         int
		tc        *commonv1.TimeControl
		budget    time.Duration
		behaviour string
	}
	jobs := make(chan job)
	out := make([]*clockGame, l.opt.games)
	var wg sync.WaitGroup
	for w := range l.opt.concurrency {
		r := l.route(w)
		wg.Go(func() {
			for j := range jobs {
				out[j.i] = l.create(ctx, r, j.i, j.tc, j.budget, j.behaviour)
			}
		})
	}
	progress := time.NewTicker(5 * time.Second)
	defer progress.Stop()
	for i := range l.opt.games {
		budget := l.opt.minMain + time.Duration(rng.Float64()*float64(l.opt.maxMain-l.opt.minMain))
		budget = budget.Truncate(time.Millisecond)
		tc := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(budget)}}}
		if rng.Float64() < l.opt.byoyomi {
			// Byo-yomi milestones are deadlines too: more work for the
			// sweepers within the same budget.
			periods := 1 + rng.IntN(2)
			tc = &commonv1.TimeControl{Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{
				MainTime: durationpb.New(max(0, budget-time.Duration(periods)*time.Second)), Periods: uint32(periods), PeriodTime: durationpb.New(time.Second),
			}}}
		}
		behaviour := "idle"
		switch r := rng.Float64(); {
		case r < l.opt.early:
			behaviour = "early"
		case r < l.opt.early+l.opt.racing:
			behaviour = "racing"
		}
		select {
		case jobs <- job{i: i, tc: tc, budget: budget, behaviour: behaviour}:
		case <-ctx.Done():
		}
		select {
		case <-progress.C:
			fmt.Fprintf(stderr, "progress: created %d/%d games, errors %d\n", l.setupDone.Load(), l.opt.games, l.errs.Load())
		default:
		}
	}
	close(jobs)
	wg.Wait()
	return slices.DeleteFunc(out, func(g *clockGame) bool { return g == nil })
}

func (l *clocksLoad) create(ctx context.Context, r *gameRoute, i int, tc *commonv1.TimeControl, budget time.Duration, behaviour string) *clockGame {
	if ctx.Err() != nil {
		return nil
	}
	// Both kinds, one after the other. The later moves (h10g8, h1g3) are
	// horse moves in both; the first is a Xiangqi cannon's, or a Janggi
	// soldier's, whose cannons cannot move without a screen.
	kind, first := commonv1.GameKind_GAME_KIND_XIANGQI, "h3e3"
	var start *commonv1.Position
	if i%2 == 1 {
		kind, first, start = commonv1.GameKind_GAME_KIND_JANGGI, "a4b4", &commonv1.Position{Fen: janggiStart}
	}
	req := &gamev1.CreateGameRequest{
		RequestId: fmt.Sprintf("ltc-%s-%d", l.runID, i), Kind: kind, Start: start,
		Seats:       []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, PlayerId: "ltc-a"}, {Side: commonv1.Side_SIDE_SECOND, PlayerId: "ltc-b"}},
		TimeControl: tc,
		// Long enough for the whole setup and spread: no game may be
		// aborted before its clock starts.
		FirstMoveTime: durationpb.New(time.Hour),
	}
	resp, err := onReplicas(ctx, r, func(c gamev1.GameServiceClient) (*gamev1.CreateGameResponse, error) {
		return c.CreateGame(ctx, req)
	})
	if err != nil {
		l.fail("create: %v", err)
		return nil
	}
	g := &clockGame{id: resp.GetGameId(), tokens: map[commonv1.Side]string{}, behaviour: behaviour, budget: budget}
	for _, cr := range resp.GetCredentials() {
		g.tokens[cr.GetSide()] = cr.GetToken()
	}
	if _, err := l.move(ctx, r, g, commonv1.Side_SIDE_FIRST, first, 0, "1"); err != nil {
		l.fail("first move of %s: %v", g.id, err)
		return nil
	}
	l.setupDone.Add(1)
	return g
}

// move sends a move, and again with the same request id while its replica
// is unavailable: a move applied before its answer got lost is answered
// as it was first, with the instant it was played at and the deadline it
// set, so the checks judge the move the game holds, whichever call
// applied it.
func (l *clocksLoad) move(ctx context.Context, r *gameRoute, g *clockGame, side commonv1.Side, mv string, lag time.Duration, n string) (*gamev1.MakeMoveResponse, error) {
	req := &gamev1.MakeMoveRequest{GameId: g.id, RequestId: g.id + "-" + n, Move: &commonv1.Move{Coordinate: mv}}
	if lag > 0 {
		req.ReportedLag = durationpb.New(lag)
	}
	seat := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+g.tokens[side])
	return onReplicas(ctx, r, func(c gamev1.GameServiceClient) (*gamev1.MakeMoveResponse, error) {
		return c.MakeMove(seat, req)
	})
}

// read reads a game as its first side, through r.
func (l *clocksLoad) read(ctx context.Context, r *gameRoute, g *clockGame) (*gamev1.GetGameResponse, error) {
	seat := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+g.tokens[commonv1.Side_SIDE_FIRST])
	return onReplicas(ctx, r, func(c gamev1.GameServiceClient) (*gamev1.GetGameResponse, error) {
		return c.GetGame(seat, &gamev1.GetGameRequest{GameId: g.id})
	})
}

// route is the route of the calls of one game, or of one worker: they
// start on replica i mod the number of replicas, and move to the next
// while theirs is unavailable.
func (l *clocksLoad) route(i int) *gameRoute {
	retried := func() { l.retries.Add(1) }
	return &gameRoute{replicas: l.replicas, replica: i % len(l.replicas), conn: i / len(l.replicas), retry: true, moved: retried, renewed: retried}
}

// calibrate estimates the server's clock offset from a few reads made
// while nothing else runs, so that the round trips are short and even.
func (l *clocksLoad) calibrate(ctx context.Context, r *gameRoute, g *clockGame) {
	md := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+g.tokens[commonv1.Side_SIDE_FIRST])
	for range 20 {
		// The round trip of the call answered, not of those that failed
		// before it.
		var sent time.Time
		resp, err := onReplicas(ctx, r, func(c gamev1.GameServiceClient) (*gamev1.GetGameResponse, error) {
			sent = time.Now()
			return c.GetGame(md, &gamev1.GetGameRequest{GameId: g.id})
		})
		if err != nil {
			l.fail("calibrate: %v", err)
			return
		}
		l.sampleOffset(sent, time.Now(), resp.GetGame().GetClocks().GetAsOf().AsTime())
	}
}

func (l *clocksLoad) sampleOffset(sent, recv, server time.Time) {
	if server.IsZero() || server.Unix() <= 0 {
		return
	}
	rtt := recv.Sub(sent)
	l.offMu.Lock()
	defer l.offMu.Unlock()
	if l.offRTT == 0 || rtt < l.offRTT {
		l.offRTT = rtt
		l.offset = server.Sub(sent.Add(rtt / 2))
	}
}

func (l *clocksLoad) serverOffset() time.Duration {
	l.offMu.Lock()
	defer l.offMu.Unlock()
	return l.offset
}

// offsetError bounds the error of serverOffset: half the round trip it
// was measured by, the millisecond the server's instants are given in,
// and replicaSkew.
func (l *clocksLoad) offsetError() time.Duration {
	l.offMu.Lock()
	defer l.offMu.Unlock()
	return l.offRTT/2 + time.Millisecond + replicaSkew
}

// replicaSkew bounds how far replicas' clocks differ: each reads Redis'
// time at an anchor, behind by that reply's latency, and runs on its own
// clock since, while the offset is measured against one replica.
const replicaSkew = 25 * time.Millisecond

// local converts a server instant to this machine's clock.
func (l *clocksLoad) local(server time.Time) time.Time { return server.Add(-l.serverOffset()) }

// play starts the game's clock at startAt, acts out its behaviour and
// checks the outcome after the flag instant.
func (l *clocksLoad) play(ctx context.Context, r *gameRoute, g *clockGame, startAt time.Time, raceOffset time.Duration) {
	if !sleepUntil(ctx, startAt) {
		l.note("game %s: not checked: the run ended before its clock was to start", g.id)
		return
	}
	resp, err := l.move(ctx, r, g, commonv1.Side_SIDE_SECOND, "h10g8", 0, "2")
	if err != nil {
		l.fail("second move of %s: %v", g.id, err)
		return
	}
	l.started.Add(1)
	d := resp.GetGame().GetClocks().GetDeadline()
	if d == nil {
		l.fail("game %s: no deadline after both first moves", g.id)
		return
	}
	g.deadline = d.AsTime()
	// The clock started at the commit, in whole milliseconds.
	start := time.UnixMilli(resp.GetGame().GetClocks().GetAsOf().AsTime().UnixMilli())
	g.grace = max(0, g.deadline.Sub(start)-g.budget)
	switch g.behaviour {
	case "early":
		l.thirdMove(ctx, r, g, start.Add(g.budget/2), 0)
	case "racing":
		l.thirdMove(ctx, r, g, g.deadline.Add(-raceOffset), l.opt.reportedLag)
	}
	if !sleepUntil(ctx, l.local(g.flagAt()).Add(l.opt.checkAfter)) {
		l.note("game %s: not checked: the run ended before its flag instant was %v past", g.id, l.opt.checkAfter)
		return
	}
	l.check(ctx, r, g)
}

// thirdMove plays the first side's move at the server instant at.
func (l *clocksLoad) thirdMove(ctx context.Context, r *gameRoute, g *clockGame, at time.Time, lag time.Duration) {
	if !sleepUntil(ctx, l.local(at)) {
		return
	}
	// The server credits at most its grace for the reported lag.
	g.moveSent, g.limit = true, g.budget+min(lag, g.grace)
	resp, err := l.move(ctx, r, g, commonv1.Side_SIDE_FIRST, "h1g3", lag, "3")
	switch {
	case err == nil:
		g.accepted = true
		g.playedAt = resp.GetMove().GetPlayedAt().AsTime()
		if d := resp.GetGame().GetClocks().GetDeadline(); d != nil {
			g.deadline2 = d.AsTime()
		}
	case status.Code(err) == codes.FailedPrecondition:
		g.refused, g.refusedAt = true, time.Now()
	default:
		l.fail("third move of %s: %v", g.id, err)
	}
}

// check reads the game once its flag instant is CheckAfter past.
func (l *clocksLoad) check(ctx context.Context, r *gameRoute, g *clockGame) {
	resp, err := l.read(ctx, r, g)
	if err != nil {
		l.fail("read %s: %v", g.id, err)
		return
	}
	gm := resp.GetGame()
	// An outage excused in the running turn moved its flag instant later
	// by as much: the game is read again CheckAfter past that one.
	for waited := time.Duration(0); gm.GetStatus() == commonv1.GameStatus_GAME_STATUS_ONGOING; {
		excused, err := l.runningExcused(ctx, r, g, gm)
		if err != nil {
			l.fail("events of %s: %v", g.id, err)
			return
		}
		if excused <= waited {
			break
		}
		waited = excused
		if !sleepUntil(ctx, l.local(g.flagAt().Add(excused)).Add(l.opt.checkAfter)) {
			l.note("game %s: not checked: the run ended before its flag instant, %v excused, was %v past", g.id, excused, l.opt.checkAfter)
			return
		}
		if resp, err = l.read(ctx, r, g); err != nil {
			l.fail("read %s: %v", g.id, err)
			return
		}
		gm = resp.GetGame()
	}
	// Read, so judged whatever the outcome.
	defer l.checked.Add(1)
	third := len(gm.GetMoves()) >= 3
	switch {
	case g.accepted && !third, g.refused && third:
		l.inconsistent.Add(1)
		l.note("game %s: the third move was answered accepted=%v but the game has %d moves", g.id, g.accepted, len(gm.GetMoves()))
	case g.accepted && g.playedAt.After(g.lastInTime()):
		l.judgeLateAccept(ctx, r, g)
	case g.refused && g.refusedAt.Before(l.local(g.lastInTime()).Add(-l.offsetError())):
		// Refused before its last in-time instant had come, whatever the
		// error of the clock offset: the move reached the server in time,
		// whatever ended the game after. An early move is refused so only
		// by a fault; a racing one, sent near that instant, may be refused
		// rightly only once it has passed, its game ending there.
		l.wrong.Add(1)
		l.note("game %s: the third move was refused at %v, before its last in-time instant %v", g.id, g.refusedAt, l.local(g.lastInTime()))
		return
	}
	if g.behaviour == "racing" {
		switch {
		case third:
			l.raceIn.Add(1)
		case g.moveSent:
			l.raceLate.Add(1)
		}
	}
	switch gm.GetStatus() {
	case commonv1.GameStatus_GAME_STATUS_ONGOING:
		// Told at the end, once read again (rereadMissed): an outage under
		// way may yet be excused, moving the flag instant later.
		l.missed.Add(1)
		l.mu.Lock()
		l.missedGames = append(l.missedGames, g)
		l.mu.Unlock()
		return
	case commonv1.GameStatus_GAME_STATUS_ENDED:
		if gm.GetResult().GetMethod() == commonv1.EndMethod_END_METHOD_TIMEOUT {
			break
		}
		fallthrough
	default:
		l.unexp.Add(1)
		l.note("game %s: %v by %v", g.id, gm.GetStatus(), gm.GetResult().GetMethod())
		return
	}
	if want := timeoutPoints(gm.GetKind()); !proto.Equal(gm.GetResult().GetPoints(), want) {
		// No piece is ever taken in these games: a Janggi timeout
		// carries the starting totals, a Xiangqi one none.
		l.unexp.Add(1)
		l.note("game %s: a %v timeout with points %v, want %v", g.id, gm.GetKind(), gm.GetResult().GetPoints(), want)
		return
	}
	var flaggedSide commonv1.Side
	switch gm.GetResult().GetWinner() {
	case commonv1.Winner_WINNER_FIRST:
		flaggedSide = commonv1.Side_SIDE_SECOND
	case commonv1.Winner_WINNER_SECOND:
		flaggedSide = commonv1.Side_SIDE_FIRST
	default:
		// A player whose clock runs out loses, in both games.
		l.unexp.Add(1)
		l.note("game %s: a timeout with winner %v", g.id, gm.GetResult().GetWinner())
		return
	}
	deadline := g.deadline
	if third {
		// The first side's move stands: its clock stopped in time and the
		// second side, who never moves, must be the one flagged.
		if flaggedSide != commonv1.Side_SIDE_SECOND {
			l.wrong.Add(1)
			l.note("game %s: the first side's move was in time, yet it was flagged", g.id)
			return
		}
		if g.deadline2.IsZero() {
			// The move's answer was lost: its deadline is unknown, so
			// only the side is checked.
			l.flagged.Add(1)
			return
		}
		deadline = g.deadline2
	} else if flaggedSide != commonv1.Side_SIDE_FIRST {
		l.unexp.Add(1)
		l.note("game %s: the second side was flagged although the first never moved in time", g.id)
		return
	}
	ended := gm.GetEndedAt().AsTime()
	if !third && g.moveSent && g.lastInTime().Before(deadline) {
		// The late move may have ended the game itself, at its own time.
		deadline = g.lastInTime()
	}
	excused, err := l.runningExcused(ctx, r, g, gm)
	if err != nil {
		l.fail("events of %s: %v", g.id, err)
		return
	}
	if g.streamEnd != nil && !proto.Equal(g.streamEnd, gm.GetResult()) {
		l.inconsistent.Add(1)
		l.note("game %s: its stream ended it %v, its state says %v", g.id, g.streamEnd, gm.GetResult())
		return
	}
	if excused > 0 {
		// Neither the flag nor a late move can end the turn before the
		// instant the outage moved later.
		l.excused.Add(1)
		deadline = deadline.Add(excused)
	}
	if !ended.After(deadline) {
		l.wrong.Add(1)
		l.note("game %s: flagged at %v, not after its deadline %v (%v excused)", g.id, ended, deadline, excused)
		return
	}
	if (third || !g.moveSent) && ended.After(deadline.Add(l.opt.checkAfter)) {
		// Flagged by the clock service, but later than CheckAfter past
		// its instant: it was missed, whenever the read came back. (A
		// late move ends the game itself, at its own time.)
		l.missed.Add(1)
		l.recordLate(g, deadline, ended)
		l.note("game %s: flagged at %v, more than %v after its deadline %v (%v excused)", g.id, ended, l.opt.checkAfter, deadline, excused)
		return
	}
	l.flagged.Add(1)
	// A late move ends the game itself; only the flags that the clock
	// service alone could make measure its lateness.
	if third || !g.moveSent {
		l.recordLate(g, deadline, ended)
	}
}

// judgeLateAccept judges a third move accepted past its last in-time
// instant: in time only if a storage outage during its turn was excused
// (OUTAGE_EXCUSED), which moves that instant later by as much, as the game
// service does for a player who could not move while Redis was out of
// reach.
func (l *clocksLoad) judgeLateAccept(ctx context.Context, r *gameRoute, g *clockGame) {
	excused, err := l.turnExcused(ctx, r, g, commonv1.Side_SIDE_FIRST, 2, 0)
	if err != nil {
		l.fail("events of %s: %v", g.id, err)
		return
	}
	if last := g.lastInTime().Add(excused); g.playedAt.After(last) {
		l.inconsistent.Add(1)
		l.note("game %s: a move at %v was accepted after its last in-time instant %v (%v excused)", g.id, g.playedAt, last, excused)
	}
}

// runningTurn is the side whose turn runs once the game has moves moves,
// and the ply of the move that began it: the first side's after both
// first moves, the second side's after the first side's third.
func runningTurn(moves int) (commonv1.Side, uint32) {
	if moves >= 3 {
		return commonv1.Side_SIDE_SECOND, 3
	}
	return commonv1.Side_SIDE_FIRST, 2
}

// runningExcused is turnExcused of the turn that runs in gm, as read.
func (l *clocksLoad) runningExcused(ctx context.Context, r *gameRoute, g *clockGame, gm *gamev1.Game) (time.Duration, error) {
	side, ply := runningTurn(len(gm.GetMoves()))
	return l.turnExcused(ctx, r, g, side, ply, gm.GetVersion())
}

// turnExcused reads the game's events and returns how much of side's turn,
// begun by move ply, was excused for a storage outage: each
// OUTAGE_EXCUSED event carries the turn's total so far. It reads up to the
// move after it, the stream's end, or version upTo (0: no bound). A
// stream that fails Unavailable is opened again after the last version it
// delivered, as an app resumes one.
func (l *clocksLoad) turnExcused(ctx context.Context, r *gameRoute, g *clockGame, side commonv1.Side, ply uint32, upTo uint64) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, eventsReadTimeout)
	defer cancel()
	seat := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+g.tokens[commonv1.Side_SIDE_FIRST])
	var excused time.Duration
	var last uint64
	var at uint32 // the ply of the last move read
	for failed := 0; ; failed++ {
		st, err := r.client().StreamEvents(seat, &gamev1.StreamEventsRequest{GameId: g.id, AfterVersion: last})
		for err == nil {
			var m *gamev1.StreamEventsResponse
			if m, err = st.Recv(); err != nil {
				break
			}
			// Failures are counted in a row: this stream got somewhere.
			failed = 0
			ev := m.GetEvent()
			if ev == nil {
				continue
			}
			last = ev.GetVersion()
			if mp := ev.GetMovePlayed(); mp != nil {
				at = mp.GetPly()
			}
			if end := ev.GetGameEnded(); end != nil {
				g.streamEnd = end.GetResult()
			}
			if at > ply {
				return excused, nil
			}
			if ce := ev.GetClock(); at == ply && ce.GetKind() == gamev1.ClockEventKind_CLOCK_EVENT_KIND_OUTAGE_EXCUSED && ce.GetSide() == side {
				excused = max(excused, ce.GetExcused().AsDuration())
			}
			if upTo != 0 && last >= upTo {
				return excused, nil
			}
		}
		if err == io.EOF {
			return excused, nil
		}
		if !r.failover(ctx, err, failed) {
			return 0, fmt.Errorf("stream events: %w", err)
		}
	}
}

// eventsReadTimeout bounds reading a game's events up to its third move,
// which are all in the log by then.
const eventsReadTimeout = 10 * time.Second

func (l *clocksLoad) recordLate(g *clockGame, deadline, ended time.Time) {
	late := float64(ended.Sub(deadline.Add(time.Millisecond)).Microseconds()) / 1000
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lateness = append(l.lateness, late)
	l.slowest = append(l.slowest, slowFlag{id: g.id, behaviour: g.behaviour, lateMs: late, flagAt: deadline.Add(time.Millisecond)})
	slices.SortFunc(l.slowest, func(a, b slowFlag) int { return cmp.Compare(b.lateMs, a.lateMs) })
	l.slowest = l.slowest[:min(len(l.slowest), 5)]
}

// rereadMissed reads the missed games once more at the end: those that
// were flagged since count in the lateness figures with their real
// delay, so that missed games do not flatter p99 and max. One whose turn
// was excused an outage, not yet told when it was checked (the outage was
// still under way), and which was flagged past the instant that moved it
// to, and no more than CheckAfter past, was not missed.
func (l *clocksLoad) rereadMissed(ctx context.Context) {
	l.mu.Lock()
	missed := slices.Clone(l.missedGames)
	l.mu.Unlock()
	sem := make(chan struct{}, l.opt.concurrency)
	var wg sync.WaitGroup
	for i, g := range missed {
		r := l.route(i)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if !l.rejudge(ctx, r, g) {
				l.note("game %s: still running %v after its flag instant", g.id, l.opt.checkAfter)
			}
		})
	}
	wg.Wait()
}

// rejudge reads a missed game again, records its lateness if flagged
// since, and reports whether an excuse explains the wait: then it counts
// as flagged (or wrongly flagged), not missed.
func (l *clocksLoad) rejudge(ctx context.Context, r *gameRoute, g *clockGame) bool {
	resp, err := l.read(ctx, r, g)
	gm := resp.GetGame()
	if err != nil || gm.GetResult().GetMethod() != commonv1.EndMethod_END_METHOD_TIMEOUT {
		return false
	}
	third := len(gm.GetMoves()) >= 3
	deadline := g.deadline
	switch {
	case third && g.deadline2.IsZero(), !third && g.moveSent:
		return false // not a flag whose lateness is known
	case third:
		deadline = g.deadline2
	}
	excused, err := l.runningExcused(ctx, r, g, gm)
	if err != nil {
		return false
	}
	deadline = deadline.Add(excused)
	ended := gm.GetEndedAt().AsTime()
	l.recordLate(g, deadline, ended)
	if excused == 0 || ended.After(deadline.Add(l.opt.checkAfter)) {
		return false
	}
	l.missed.Add(-1)
	l.excused.Add(1)
	flagged, _ := runningTurn(len(gm.GetMoves()))
	if !ended.After(deadline) || winnerOf(flagged) != gm.GetResult().GetWinner() {
		l.wrong.Add(1)
		l.note("game %s: flagged at %v, not after its deadline %v (%v excused), or the wrong side", g.id, ended, deadline, excused)
		return true
	}
	l.flagged.Add(1)
	return true
}

// timeoutPoints is the result's points of a timeout in a game of kind in
// which no piece was taken: the Janggi games' start's totals, Han's with
// its 1.5; none in Xiangqi.
func timeoutPoints(kind commonv1.GameKind) *commonv1.Points {
	if kind != commonv1.GameKind_GAME_KIND_JANGGI {
		return nil
	}
	p, err := rules.ParseFEN(rules.Janggi, janggiStart)
	if err != nil {
		// A constant that parses: unreachable, and every Janggi game would
		// show as unexpected.
		return nil
	}
	return &commonv1.Points{First: p.Points(rules.First), Second: p.Points(rules.Second)}
}

// winnerOf is the winner when side runs out of time.
func winnerOf(flagged commonv1.Side) commonv1.Winner {
	if flagged == commonv1.Side_SIDE_FIRST {
		return commonv1.Winner_WINNER_SECOND
	}
	return commonv1.Winner_WINNER_FIRST
}

// flagAt is the first instant the game must be flagged at, but for an
// outage excused.
func (g *clockGame) flagAt() time.Time {
	if g.accepted {
		return g.deadline2.Add(time.Millisecond)
	}
	return g.deadline.Add(time.Millisecond)
}

// lastInTime is the last instant the third move could be in time.
func (g *clockGame) lastInTime() time.Time {
	return g.deadline.Add(-g.grace - g.budget).Add(g.limit)
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

func quantilesMs(v []float64) (p50, p99, maxV float64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return quantile(s, 0.50), quantile(s, 0.99), s[len(s)-1]
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
