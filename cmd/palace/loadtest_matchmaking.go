package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/auth"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/newest"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/pkg/rulespb"
	"github.com/palacehq/palace/pkg/server"
)

// maxPlayersPerConn keeps the watches and calls of the players waiting
// at once within the 4,096 a Palace server carries on one connection:
// the tool opens one connection per matchmaking address.
const maxPlayersPerConn = 2000

// mmReport is the matchmaking load test's result, printed as its last line.
type mmReport struct {
	// Tickets is the number of tickets that were to be matched (N);
	// cancelled ones, entered and re-entered, come on top.
	Tickets int `json:"tickets"`
	Matched int `json:"matched"`
	// Unmatched counts tickets still waiting at the end although another
	// ticket of their pool (another player, so a compatible partner: the
	// server's rating window widens without bound by default) waited too.
	Unmatched int `json:"unmatched"`
	// Waiting counts every ticket still waiting at the end.
	Waiting int `json:"waiting"`
	// Unsettled counts the tickets neither matched nor waiting at the end:
	// never entered (the run ended first, or EnterQueue failed), whose
	// watch ended without a match, or paired with the word of their game
	// not come by the end (their cancel then refused). A pairing whose
	// partner is unsettled so is not judged. Matched + waiting + unsettled
	// = tickets.
	Unsettled int `json:"unsettled"`
	// DoublePaired counts tickets whose pairing is wrong: in a game with
	// other than exactly one partner, with themselves, across pools,
	// reported with two games, not one on each side, handed a credential
	// of another seat, or seated otherwise by the game service, or in a
	// game of another kind, time control or rating than their pool's.
	DoublePaired int `json:"double_paired"`
	Games        int `json:"games"`
	Cancelled    int `json:"cancelled"`
	// Time to match: from sending EnterQueue to receiving the game and
	// seat on WatchTicket.
	P50ms float64 `json:"p50_ms"`
	P90ms float64 `json:"p90_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// TicketsPerS is the rate tickets entered at: those that entered, over
	// the time until the last one did (0 when none did). With --rate 0 a
	// player enters only when another was matched, so this is the
	// throughput the servers sustained.
	TicketsPerS float64 `json:"tickets_per_s"`
	Errors      int64   `json:"errors"`
	// Rewatched counts the watches opened again after one failed
	// Unavailable (a replica gone, a Redis failover): not errors, as an
	// app does the same.
	Rewatched int64 `json:"rewatched"`
	// GamesChecked is how many games were read back from the game service.
	GamesChecked int      `json:"games_checked"`
	Pools        []string `json:"pools"`
	Concurrency  int      `json:"concurrency"`
	Rate         float64  `json:"rate,omitempty"`
	Ratings      string   `json:"ratings"`
	ElapsedS     float64  `json:"elapsed_s"`
}

// mmPool is one pool the load test uses.
type mmPool struct {
	name  string
	kind  commonv1.GameKind
	tc    *commonv1.TimeControl
	rated bool
}

func mmByoYomi(main time.Duration, periods uint32, period time.Duration) *commonv1.TimeControl {
	return &commonv1.TimeControl{Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{
		MainTime: durationpb.New(main), Periods: periods, PeriodTime: durationpb.New(period)}}}
}

func mmFischer(main, inc time.Duration) *commonv1.TimeControl {
	return &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{
		MainTime: durationpb.New(main), Increment: durationpb.New(inc)}}}
}

// mmPools are the pools tickets are spread over; the rated one only when
// the tool can mint account credentials.
func mmPools(rated bool) []mmPool {
	ps := []mmPool{
		{name: "janggi/5m+3x30s/casual", kind: commonv1.GameKind_GAME_KIND_JANGGI, tc: mmByoYomi(5*time.Minute, 3, 30*time.Second)},
		{name: "janggi/10m+3x30s/casual", kind: commonv1.GameKind_GAME_KIND_JANGGI, tc: mmByoYomi(10*time.Minute, 3, 30*time.Second)},
		{name: "xiangqi/10m+5s/casual", kind: commonv1.GameKind_GAME_KIND_XIANGQI, tc: mmFischer(10*time.Minute, 5*time.Second)},
	}
	if rated {
		ps = append(ps, mmPool{name: "janggi/5m+3x30s/rated", kind: commonv1.GameKind_GAME_KIND_JANGGI, tc: mmByoYomi(5*time.Minute, 3, 30*time.Second), rated: true})
	}
	return ps
}

// mmTicket is one ticket's story.
type mmTicket struct {
	idx    int
	pool   int
	player string
	token  string
	rating int32
	cancel bool
	// cancelAfter is how long a cancelling player waits before cancelling.
	cancelAfter time.Duration
	ticketID    string
	// enteredAt is when the ticket kept (the last one entered) entered.
	enteredAt time.Time
	state     matchmakingv1.TicketState
	games     []string // distinct game ids the ticket was reported with
	seat      *matchmakingv1.Seat
	latency   time.Duration
	// pairedLate: still waiting when the run ended, its cancel then was
	// refused because it had been paired, the word of its game not yet
	// come. Unsettled, and its partner's pairing is not judged.
	pairedLate bool
}

type mmLoad struct {
	mm      []matchmakingv1.MatchmakingServiceClient
	game    gamev1.GameServiceClient
	pools   []mmPool
	tickets []*mmTicket

	matched, cancelled, errs atomic.Int64
	rewatched                atomic.Int64
	mu                       sync.Mutex
	errSample                []string
}

func (l *mmLoad) fail(format string, a ...any) {
	l.errs.Add(1)
	l.mu.Lock()
	if len(l.errSample) < 10 {
		l.errSample = append(l.errSample, fmt.Sprintf(format, a...))
	}
	l.mu.Unlock()
}

func runLoadtestMatchmaking(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("palace loadtest matchmaking", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addrs := fs.String("addr", "localhost:8080", "matchmaking host:port; several, comma-separated, spread the tickets over replicas")
	n := fs.Int("tickets", 1000, "tickets to match (even)")
	concurrency := fs.Int("concurrency", 32, "most players waiting at once")
	rate := finiteFlag(fs, "rate", 0, "tickets entered per second (open loop, capped by --concurrency); 0: as fast as --concurrency players allow")
	cancelShare := finiteFlag(fs, "cancel", 0.1, "share of players who enter, cancel and enter again")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up waiting after this long")
	gameAddr := fs.String("game-addr", "", "game service host:port to read every game back from; empty: do not check")
	// A secret: from the environment, so that it need not show in ps.
	keys := new(string)
	app.StringFlag(fs, keys, "player-signing-keys", "", "the servers' --player-signing-keys: lets the tool mint its players' credentials, guests too (else it makes them with CreateGuest, which a server bounds per client address), and add a rated pool")
	ratingSD := finiteFlag(fs, "rating-sd", 200, "standard deviation of the casual ratings (normal around 1300)")
	ratings := fs.String("ratings", "pairs", `"pairs": tickets come in pairs of one pool whose ratings are within 50 of each other, the pairs spread over the ratings, so every ticket has a compatible partner and the test measures the servers; "independent": every rating drawn on its own, so rating outliers also wait for their window to widen`)
	seed := fs.Uint64("seed", 1, "random seed")
	getTransport := transportFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	tr, err := getTransport()
	if err != nil {
		fmt.Fprintf(stderr, "palace loadtest matchmaking: %v\n", err)
		return exitUsage
	}
	if *n <= 0 || *n%2 != 0 || *concurrency < 1 || *cancelShare < 0 || *cancelShare > 1 || (*ratings != "pairs" && *ratings != "independent") || *rate < 0 || *timeout <= 0 {
		fmt.Fprintln(stderr, "palace loadtest matchmaking: --tickets must be even and positive, --concurrency positive, --cancel within 0..1, --ratings pairs or independent, --rate at least 0, --timeout positive")
		return exitUsage
	}
	var ring *auth.Keyring
	if *keys != "" {
		parsed, err := auth.ParseKeys(*keys)
		if err == nil {
			ring, err = auth.NewKeyring(parsed...)
		}
		if err != nil {
			fmt.Fprintln(stderr, "palace loadtest matchmaking: --player-signing-keys:", err)
			return exitUsage
		}
	}
	l := &mmLoad{pools: mmPools(ring != nil)}
	if replicas := len(replicaAddrs(*addrs)); *concurrency > maxPlayersPerConn*max(replicas, 1) {
		// More would wait, unseen, for a server's room on the connection.
		fmt.Fprintf(stderr, "palace loadtest matchmaking: --concurrency is at most %d per matchmaking address: each player waiting holds a watch and a call at once, and a server carries 4,096 per connection\n", maxPlayersPerConn)
		return exitUsage
	}
	replicas, ccs, err := replicaClients(tr, *addrs, 1, matchmakingv1.NewMatchmakingServiceClient)
	if err != nil {
		fmt.Fprintln(stderr, "palace loadtest matchmaking:", err)
		return exitUsage
	}
	defer closeAll(ccs)
	for _, clients := range replicas {
		l.mm = append(l.mm, clients...)
	}
	if *gameAddr != "" {
		cc, err := tr.dial(*gameAddr)
		if err != nil {
			fmt.Fprintln(stderr, "palace loadtest matchmaking:", err)
			return exitUsage
		}
		defer cc.Close()
		l.game = gamev1.NewGameServiceClient(cc)
	}

	rng := rand.New(rand.NewPCG(*seed, 0x6d6d))
	fmt.Fprintf(stderr, "creating %d players over %d pools...\n", *n, len(l.pools))
	if err := l.players(ctx, *n, ring, rng, *cancelShare, *ratingSD, *ratings == "pairs"); err != nil {
		fmt.Fprintln(stderr, "palace loadtest matchmaking:", err)
		// The last line is the report on every run, this one too.
		rep := mmReport{Tickets: len(l.tickets), Concurrency: *concurrency}
		for _, t := range l.tickets {
			if t.token == "" {
				rep.Errors++
			}
		}
		out, _ := json.Marshal(rep)
		fmt.Fprintln(stdout, string(out))
		return exitFail
	}

	runCtx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	start := time.Now()
	stopProgress := l.progress(stderr, start, *n)
	work := make(chan *mmTicket)
	var wg sync.WaitGroup
	for range min(*concurrency, *n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range work {
				l.play(runCtx, t)
			}
		}()
	}
	var pace *time.Ticker
	if *rate > 0 {
		pace = time.NewTicker(time.Duration(float64(time.Second) / *rate))
		defer pace.Stop()
	}
	for _, t := range l.tickets {
		if pace != nil {
			select {
			case <-pace.C:
			case <-runCtx.Done():
			}
		}
		select {
		case work <- t:
		case <-runCtx.Done():
		}
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()

	rep := l.report(ctx, elapsed, *concurrency)
	rep.TicketsPerS = l.enterRate(start)
	rep.Rate, rep.Ratings = *rate, *ratings
	for _, e := range l.errSample {
		fmt.Fprintln(stderr, "error:", e)
	}
	if rep.Unsettled > 0 {
		fmt.Fprintf(stderr, "palace loadtest matchmaking: %d of %d tickets neither matched nor waiting at the end (never entered, or their watch failed)\n", rep.Unsettled, rep.Tickets)
	}
	out, _ := json.Marshal(rep)
	fmt.Fprintln(stdout, string(out))
	if rep.faulty() {
		return exitFail
	}
	return exitOK
}

// faulty tells whether the report shows a fault: a wrong pairing, a
// ticket left without a partner it could have had or never settled, or a
// failed call.
func (r mmReport) faulty() bool {
	return r.DoublePaired > 0 || r.Unmatched > 0 || r.Unsettled > 0 || r.Errors > 0
}

// enterRate is the rate the tickets that entered did so at, from start to
// the last entry; 0 when none entered.
func (l *mmLoad) enterRate(start time.Time) float64 {
	var n int
	var last time.Time
	for _, t := range l.tickets {
		if t.enteredAt.IsZero() {
			continue
		}
		n++
		if t.enteredAt.After(last) {
			last = t.enteredAt
		}
	}
	if n == 0 || !last.After(start) {
		return 0
	}
	return float64(n) / last.Sub(start).Seconds()
}

// players makes one player per ticket: accounts for the rated pool and
// guests for the casual ones, all minted when the tool has the signing
// keys; else the guests through CreateGuest, which a server allows so many
// times an hour per client address.
// Partners come in pairs in the same pool, so every pool gets an even
// number of tickets and everyone can be matched.
func (l *mmLoad) players(ctx context.Context, n int, ring *auth.Keyring, rng *rand.Rand, cancelShare, sd float64, paired bool) error {
	l.tickets = make([]*mmTicket, n)
	var pairRating int32
	for i := range n {
		l.tickets[i] = &mmTicket{
			idx: i, pool: (i / 2) % len(l.pools), rating: mmRating(rng, sd),
			cancel: rng.Float64() < cancelShare, cancelAfter: time.Duration(rng.IntN(20)) * time.Millisecond,
		}
		if paired {
			if i%2 == 0 {
				pairRating = l.tickets[i].rating
			} else {
				l.tickets[i].rating = min(max(pairRating+int32(rng.IntN(101))-50, 700), 2300)
			}
		}
	}
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var first error
	var once sync.Once
	for _, t := range l.tickets {
		if ring != nil {
			now := time.Now()
			c := auth.Claims{Kind: auth.KindGuest, Subject: fmt.Sprintf("guest-loadtest-%d-%d", now.UnixNano(), t.idx), Name: fmt.Sprintf("Guest%d", t.idx), IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix()}
			if l.pools[t.pool].rated {
				c.Kind, c.Subject, c.Name = auth.KindAccount, fmt.Sprintf("loadtest-%d-%d", now.UnixNano(), t.idx), fmt.Sprintf("Acct%d", t.idx)
			}
			tok, err := ring.Sign(c)
			if err != nil {
				return err
			}
			t.player, t.token = c.Subject, tok
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			r, err := l.mm[t.idx%len(l.mm)].CreateGuest(ctx, &matchmakingv1.CreateGuestRequest{Nickname: fmt.Sprintf("Guest%d", t.idx)})
			if err != nil {
				if apierr.ReasonOf(err) == "RATE_LIMITED" {
					err = fmt.Errorf("%w (give the tool the server's --player-signing-keys to mint its players, or start the server with --max-guests-per-hour 0)", err)
				}
				once.Do(func() { first = fmt.Errorf("CreateGuest: %w", err) })
				return
			}
			t.player, t.token = r.GetPlayerId(), r.GetToken()
		}()
	}
	wg.Wait()
	return first
}

// mmRating draws a casual self-estimate the way players' strengths
// spread: normal around 1300 with standard deviation sd, within 700..2300.
func mmRating(rng *rand.Rand, sd float64) int32 {
	return int32(min(max(1300+sd*rng.NormFloat64(), 700), 2300))
}

func (l *mmLoad) progress(w io.Writer, start time.Time, n int) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				m := l.matched.Load()
				fmt.Fprintf(w, "matched %d/%d cancelled %d errors %d %.0f tickets/s\n",
					m, n, l.cancelled.Load(), l.errs.Load(), float64(m)/time.Since(start).Seconds())
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// play enters one player's ticket (cancelling and re-entering first for
// some), then watches it until it is matched or the run ends.
func (l *mmLoad) play(ctx context.Context, t *mmTicket) {
	pool := l.pools[t.pool]
	watcher := l.mm[(t.idx+1)%len(l.mm)] // watch through another replica when there are several
	pctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+t.token)
	enter := func() (*matchmakingv1.Ticket, error) {
		return l.enter(ctx, pctx, t, &matchmakingv1.EnterQueueRequest{
			RequestId: fmt.Sprintf("lt-%d-%d", t.idx, time.Now().UnixNano()), Kind: pool.kind, TimeControl: pool.tc, Rated: pool.rated, CasualRating: t.rating,
		})
	}
	if t.cancel {
		tk, err := enter()
		if err != nil {
			if !runEnded(ctx, err) {
				l.fail("EnterQueue: %v", err)
			}
			return
		}
		t.enteredAt = time.Now()
		time.Sleep(t.cancelAfter)
		err = l.cancelTicket(ctx, pctx, t, tk.GetTicketId())
		switch status.Code(err) {
		case codes.OK:
			l.cancelled.Add(1)
			t.enteredAt = time.Time{}
		case codes.FailedPrecondition:
			// Paired before the cancel arrived: this ticket is the player's.
			l.watch(ctx, pctx, watcher, t, tk.GetTicketId(), time.Now().Add(-t.cancelAfter))
			return
		default:
			l.fail("CancelTicket: %v", err)
			return
		}
	}
	sent := time.Now()
	tk, err := enter()
	if err != nil {
		if !runEnded(ctx, err) {
			l.fail("EnterQueue: %v", err)
		}
		return
	}
	t.enteredAt = time.Now()
	l.watch(ctx, pctx, watcher, t, tk.GetTicketId(), sent)
}

// enter sends r until it is answered other than Unavailable, up to
// rewatches times more, with the same request id, through the next
// replica when there are several: an entry answered Unavailable (a
// replica gone, a connection closed at its age while Redis was slow) may
// have been applied, and a player who gave up on it would leave its ticket
// to pair with another player's, as an app that retries does not.
func (l *mmLoad) enter(ctx, pctx context.Context, t *mmTicket, r *matchmakingv1.EnterQueueRequest) (*matchmakingv1.Ticket, error) {
	for failed := 0; ; failed++ {
		resp, err := l.mm[(t.idx+failed)%len(l.mm)].EnterQueue(pctx, r)
		if status.Code(err) != codes.Unavailable || failed == rewatches {
			return resp.GetTicket(), err
		}
		if !retryPause(ctx, failed) {
			return nil, fmt.Errorf("enter queue: %w", ctx.Err())
		}
	}
}

// cancelTicket cancels ticket id, sending the cancel again as enter
// sends an entry: a cancel answered Unavailable may not have been applied,
// and a player who walked away from it would leave its ticket to pair.
// Cancelling is idempotent, so a cancel applied before answers alike.
func (l *mmLoad) cancelTicket(ctx, pctx context.Context, t *mmTicket, id string) error {
	for failed := 0; ; failed++ {
		_, err := l.mm[(t.idx+failed)%len(l.mm)].CancelTicket(pctx, &matchmakingv1.CancelTicketRequest{TicketId: id})
		if status.Code(err) != codes.Unavailable || failed == rewatches {
			return err
		}
		if !retryPause(ctx, failed) {
			return fmt.Errorf("cancel ticket: %w", ctx.Err())
		}
	}
}

// retryPause waits before the retry that follows failed failures in a
// row, longer after each, and tells whether the run goes on.
func retryPause(ctx context.Context, failed int) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(min(100*time.Millisecond<<failed, 2*time.Second)):
		return true
	}
}

// rewatches bounds how often one ticket's watch is opened again, or its
// entry sent again, after it failed as a client is told to retry (a
// replica going away, a Redis failover), as an app would; a renewed
// connection is no failure.
const rewatches = 8

// watch follows ticket id until it is settled or the run ends; a watch
// that fails Unavailable, or is refused for load (ResourceExhausted:
// "retry later"), is opened again, through the next replica when there
// are several, since the ticket lives on in Redis.
func (l *mmLoad) watch(ctx, pctx context.Context, mm matchmakingv1.MatchmakingServiceClient, t *mmTicket, id string, sent time.Time) {
	t.ticketID, t.state = id, matchmakingv1.TicketState_TICKET_STATE_WAITING
	for failed := 0; ; {
		began := time.Now()
		err := l.watchOnce(pctx, mm, t, id, sent)
		if err == nil || runEnded(ctx, err) {
			return
		}
		if server.Renewed(err) {
			// The replica renewed the watch's connection
			// (--max-connection-age), which is no failure: the watch is
			// opened again at once, on a new connection; after a pause
			// if it was cut short, lest renewals one after another spin.
			l.rewatched.Add(1)
			if time.Since(began) < time.Second && !retryPause(ctx, 0) {
				return
			}
			continue
		}
		if retryable(err) && failed < rewatches {
			l.rewatched.Add(1)
			if !retryPause(ctx, failed) {
				return
			}
			mm = l.mm[(t.idx+2+failed)%len(l.mm)]
			failed++
			continue
		}
		l.fail("WatchTicket %s: %v", id, err)
		// Its state is unknown from now on: unsettled, not waiting.
		t.state = matchmakingv1.TicketState_TICKET_STATE_UNSPECIFIED
		return
	}
}

// retryable tells whether a failed watch is to be opened again: the
// server went away, or shed it for load, but not when a newer watch of
// the same ticket replaced it (STREAM_REPLACED), which opening it again
// would end in turn.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable:
		return true
	case codes.ResourceExhausted:
		return apierr.ReasonOf(err) != newest.ReplacedReason
	}
	return false
}

// watchOnce is one WatchTicket call of watch; it returns the call's
// failure, nil once the watch has ended cleanly.
func (l *mmLoad) watchOnce(pctx context.Context, mm matchmakingv1.MatchmakingServiceClient, t *mmTicket, id string, sent time.Time) error {
	st, err := mm.WatchTicket(pctx, &matchmakingv1.WatchTicketRequest{TicketId: id})
	if err != nil {
		return err
	}
	for {
		r, err := st.Recv()
		if err != nil {
			switch {
			case err != io.EOF:
				return err
			case err == io.EOF && (t.state == matchmakingv1.TicketState_TICKET_STATE_WAITING || t.state == matchmakingv1.TicketState_TICKET_STATE_PAIRED):
				// A watch the server ended while its ticket still waits
				// leaves the player waiting with no word of a match:
				// unsettled, not waiting.
				t.state = matchmakingv1.TicketState_TICKET_STATE_UNSPECIFIED
			}
			return nil
		}
		tk := r.GetTicket()
		t.state = tk.GetState()
		if g := tk.GetSeat().GetGameId(); g != "" && !slices.Contains(t.games, g) {
			t.games = append(t.games, g)
		}
		switch tk.GetState() {
		case matchmakingv1.TicketState_TICKET_STATE_MATCHED:
			if t.seat == nil {
				t.seat, t.latency = tk.GetSeat(), time.Since(sent)
				l.matched.Add(1)
			}
		case matchmakingv1.TicketState_TICKET_STATE_CANCELLED, matchmakingv1.TicketState_TICKET_STATE_EXPIRED:
			l.fail("ticket %s ended %v", id, tk.GetState())
		}
	}
}

// report checks every pairing and computes the figures.
func (l *mmLoad) report(ctx context.Context, elapsed time.Duration, concurrency int) mmReport {
	rep := mmReport{Tickets: len(l.tickets), Cancelled: int(l.cancelled.Load()), Concurrency: concurrency, ElapsedS: elapsed.Seconds()}
	for _, p := range l.pools {
		rep.Pools = append(rep.Pools, p.name)
	}
	l.settleWaiting(ctx)
	byGame := map[string][]*mmTicket{}
	byPlayer := map[string]*mmTicket{}
	waitingByPool := map[int][]*mmTicket{}
	var lat []time.Duration
	bad := map[*mmTicket]bool{}
	for _, t := range l.tickets {
		byPlayer[t.player] = t
		switch {
		case t.seat != nil:
			rep.Matched++
			lat = append(lat, t.latency)
			byGame[t.seat.GetGameId()] = append(byGame[t.seat.GetGameId()], t)
			if len(t.games) > 1 {
				bad[t] = true
			}
		case t.ticketID != "" && !t.pairedLate && waitingState(t.state):
			waitingByPool[t.pool] = append(waitingByPool[t.pool], t)
		default:
			rep.Unsettled++
		}
	}
	rep.Games = len(byGame)
	for id, ts := range byGame {
		if len(ts) == 1 && partnerUnknown(byPlayer[ts[0].seat.GetOpponentId()]) {
			// Its partner's word never came (its watch failed, or came
			// after the run): nothing seen of the pairing to judge.
			continue
		}
		if !pairedRightly(id, ts) {
			for _, t := range ts {
				bad[t] = true
			}
			continue
		}
		if l.game == nil {
			continue
		}
		// A game that could not be read is an error (counted), not a
		// wrong pairing: nothing was seen of it.
		switch right, read := l.seatedAsReported(ctx, id, ts); {
		case !read:
		case !right:
			for _, t := range ts {
				bad[t] = true
			}
			rep.GamesChecked++
		default:
			rep.GamesChecked++
		}
	}
	rep.DoublePaired = len(bad)
	for _, ws := range waitingByPool {
		rep.Waiting += len(ws)
		if len(ws) >= 2 {
			rep.Unmatched += len(ws)
		}
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(quantile(lat, p).Microseconds()) / 1000 }
	rep.P50ms, rep.P90ms, rep.P99ms, rep.MaxMs = q(0.50), q(0.90), q(0.99), q(1)
	rep.Errors, rep.Rewatched = l.errs.Load(), l.rewatched.Load()
	return rep
}

// settleWaiting cancels every ticket still waiting at the end, leaving
// nothing behind in the queue. One whose cancel is refused
// (FailedPrecondition) was paired, the word of its game still on its way:
// pairedLate, not waiting.
func (l *mmLoad) settleWaiting(ctx context.Context) {
	for _, t := range l.tickets {
		if t.seat != nil || t.ticketID == "" || !waitingState(t.state) {
			continue
		}
		pctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+t.token)
		if status.Code(l.cancelTicket(ctx, pctx, t, t.ticketID)) == codes.FailedPrecondition {
			t.pairedLate = true
		}
	}
}

func waitingState(s matchmakingv1.TicketState) bool {
	return s == matchmakingv1.TicketState_TICKET_STATE_WAITING || s == matchmakingv1.TicketState_TICKET_STATE_PAIRED
}

// partnerUnknown tells whether t, a ticket's partner, was never seen
// settled for want of word: its watch failed, or its game was told after
// the run.
func partnerUnknown(t *mmTicket) bool {
	return t != nil && t.seat == nil && t.ticketID != "" && (t.pairedLate || t.state == matchmakingv1.TicketState_TICKET_STATE_UNSPECIFIED)
}

// pairedRightly tells whether the tickets told of game id make one right
// pairing: two players of one pool, one on each side, each told the other
// as opponent and handed a credential for its own seat.
func pairedRightly(id string, ts []*mmTicket) bool {
	if len(ts) != 2 || ts[0].player == ts[1].player || ts[0].pool != ts[1].pool ||
		ts[0].seat.GetOpponentId() != ts[1].player || ts[1].seat.GetOpponentId() != ts[0].player {
		return false
	}
	sides := []commonv1.Side{ts[0].seat.GetSide(), ts[1].seat.GetSide()}
	slices.Sort(sides)
	if !slices.Equal(sides, []commonv1.Side{commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND}) {
		return false
	}
	return seatClaimed(ts[0], id) && seatClaimed(ts[1], id)
}

// seatClaimed tells whether t's seat credential claims t's seat: of game
// id, for t's player, on the side t was told. Its signature is the game
// service's to check; what it claims is what matchmaking handed over.
func seatClaimed(t *mmTicket, id string) bool {
	c, ok := auth.Unverified(t.seat.GetToken())
	if !ok || c.Kind != auth.KindSeat || c.Game != id || c.Subject != t.player {
		return false
	}
	// Read as the game service reads it: cho and red are first too.
	claimed, err := rules.ParseSide(c.Side)
	if err != nil {
		return false
	}
	side, err := rulespb.SideFrom(t.seat.GetSide())
	return err == nil && claimed == side
}

// seatedAsReported reads a game back: its seats must hold exactly the two
// players their tickets say, on the sides they say, in a game of their
// pool's kind, time control and rating. read is false when the game could
// not be read (an error, counted).
func (l *mmLoad) seatedAsReported(ctx context.Context, id string, ts []*mmTicket) (right, read bool) {
	gctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+ts[0].seat.GetToken())
	r, err := l.game.GetGame(gctx, &gamev1.GetGameRequest{GameId: id})
	if err != nil {
		l.fail("GetGame %s: %v", id, err)
		return false, false
	}
	pool, g := l.pools[ts[0].pool], r.GetGame()
	if g.GetKind() != pool.kind || !proto.Equal(g.GetTimeControl(), pool.tc) || g.GetRated() != pool.rated {
		return false, true
	}
	// Each ticket's player in the seat of the side its ticket names, and
	// nobody else anywhere: two seats of two sides.
	seats := g.GetSeats()
	if len(seats) != 2 || seats[0].GetSide() == seats[1].GetSide() {
		return false, true
	}
	for _, t := range ts {
		if !slices.ContainsFunc(seats, func(s *gamev1.Seat) bool {
			return s.GetSide() == t.seat.GetSide() && s.GetPlayerId() == t.player
		}) {
			return false, true
		}
	}
	return true, true
}
