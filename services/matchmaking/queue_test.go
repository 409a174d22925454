package matchmaking_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/auth"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/services/matchmaking"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

var (
	matched   = matchmakingv1.TicketState_TICKET_STATE_MATCHED
	waiting   = matchmakingv1.TicketState_TICKET_STATE_WAITING
	cancelled = matchmakingv1.TicketState_TICKET_STATE_CANCELLED
	expired   = matchmakingv1.TicketState_TICKET_STATE_EXPIRED
)

func fischer(main, inc time.Duration) *commonv1.TimeControl {
	return &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(main), Increment: durationpb.New(inc)}}}
}

func TestQueuePairsTwoGuests(t *testing.T) {
	e := newEnv(t, 1, nil)
	a, b := e.guest("Alice"), e.guest("Bob")
	ta := e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{})
	if ta.GetState() != waiting || ta.GetRating() != 1200 || ta.GetTimeControl().GetByoYomi().GetPeriods() != 3 {
		t.Fatalf("entered ticket %v: want waiting, rating 1200, the online default 5m+3x30s", ta)
	}
	tb := e.enter(e.mm[0], b, &matchmakingv1.EnterQueueRequest{})
	ra := waitTicket(t, e.mm[0], a, ta.GetTicketId(), 10*time.Second)
	rb := waitTicket(t, e.mm[0], b, tb.GetTicketId(), 10*time.Second)
	if ra.GetState() != matched || rb.GetState() != matched {
		t.Fatalf("states %v, %v: want both matched", ra.GetState(), rb.GetState())
	}
	sa, sb := ra.GetSeat(), rb.GetSeat()
	if sa.GetGameId() == "" || sa.GetGameId() != sb.GetGameId() {
		t.Fatalf("games %q and %q: want one shared game", sa.GetGameId(), sb.GetGameId())
	}
	if sa.GetSide() == sb.GetSide() || sa.GetSide() == commonv1.Side_SIDE_UNSPECIFIED {
		t.Fatalf("sides %v and %v: want one each", sa.GetSide(), sb.GetSide())
	}
	if sa.GetOpponentId() != b.id || sb.GetOpponentName() != "Alice" {
		t.Fatalf("opponents %v / %v", sa, sb)
	}
	// The seat credentials are the game's own: each opens its seat.
	g := e.gameAs(t, sa)
	for _, s := range g.GetSeats() {
		want := a.id
		if s.GetSide() == sb.GetSide() {
			want = b.id
		}
		if s.GetPlayerId() != want {
			t.Fatalf("game seat %v: want player %s", s, want)
		}
	}
	if g.GetRated() || !g.GetPublic() || g.GetTimeControl().GetByoYomi() == nil {
		t.Fatalf("game %v: want casual, public, byo-yomi", g)
	}
}

func TestQueueSidesAreRandom(t *testing.T) {
	e := newEnv(t, 1, nil)
	firsts := map[string]int{}
	// 20 games: a fair coin gives one side every time once in half a
	// million runs (12 gave it once in 2,048, and did).
	for i := range 20 {
		a, b := e.guest(fmt.Sprintf("A%d", i)), e.guest(fmt.Sprintf("B%d", i))
		ta := e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{})
		time.Sleep(30 * time.Millisecond) // a is always the first to wait
		e.enter(e.mm[0], b, &matchmakingv1.EnterQueueRequest{})
		r := waitTicket(t, e.mm[0], a, ta.GetTicketId(), 10*time.Second)
		firsts[r.GetSeat().GetSide().String()]++
		// Whichever side a drew, the seat a is told of is a's in the game.
		for _, s := range e.gameAs(t, r.GetSeat()).GetSeats() {
			if (s.GetSide() == r.GetSeat().GetSide()) != (s.GetPlayerId() == a.id) {
				t.Fatalf("game %s seat %v, while %s was told of side %v", r.GetSeat().GetGameId(), s, a.id, r.GetSeat().GetSide())
			}
		}
	}
	if len(firsts) != 2 {
		t.Fatalf("the first player to wait got %v in 20 games: sides are not random", firsts)
	}
}

func TestQueueOneTicketPerPlayerAndPool(t *testing.T) {
	e := newEnv(t, 1, nil)
	a := e.guest("Alice")
	req := &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: xiangqi}
	t1 := e.enter(e.mm[0], a, req)
	// A retry of the same request is the same ticket.
	t2 := e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{RequestId: req.RequestId, Kind: xiangqi})
	if t1.GetTicketId() != t2.GetTicketId() {
		t.Fatalf("retry made ticket %s, want %s", t2.GetTicketId(), t1.GetTicketId())
	}
	// Another request in the same pool is refused: nobody plays themselves.
	_, err := e.mm[0].EnterQueue(a.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: xiangqi})
	wantCode(t, err, codes.AlreadyExists)
	time.Sleep(200 * time.Millisecond)
	r, err := e.mm[0].CancelTicket(a.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: t1.GetTicketId()})
	if err != nil || r.GetTicket().GetState() != cancelled {
		t.Fatalf("the lone ticket was paired (with itself?): %v %v", r, err)
	}
}

// A player waiting in two pools could be paired in both and handed two
// games at once.
func TestAPlayerWaitsInOnePoolAtATime(t *testing.T) {
	e := newEnv(t, 2, nil)
	a, b := e.guest("Alice"), e.guest("Bob")
	first := &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: xiangqi}
	tx := e.enter(e.mm[0], a, first)

	// Another pool, through either replica, while the ticket waits.
	for i, mm := range e.mm {
		_, err := mm.EnterQueue(a.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi})
		wantCode(t, err, codes.AlreadyExists)
		if !strings.Contains(status.Convert(err).Message(), tx.GetTicketId()) {
			t.Fatalf("replica %d: %v: want the waiting ticket named", i, err)
		}
	}
	// A retry of the first request is still answered as it was.
	again := e.enter(e.mm[1], a, &matchmakingv1.EnterQueueRequest{RequestId: first.RequestId, Kind: xiangqi})
	if again.GetTicketId() != tx.GetTicketId() {
		t.Fatalf("retry got ticket %s, want %s", again.GetTicketId(), tx.GetTicketId())
	}

	// Once cancelled, another pool takes the player.
	if _, err := e.mm[0].CancelTicket(a.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: tx.GetTicketId()}); err != nil {
		t.Fatal(err)
	}
	tj := e.enter(e.mm[1], a, &matchmakingv1.EnterQueueRequest{Kind: janggi})
	// The retry of the cancelled ticket's request still names it.
	again = e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{RequestId: first.RequestId, Kind: xiangqi})
	if again.GetTicketId() != tx.GetTicketId() || again.GetState() != cancelled {
		t.Fatalf("retry after cancelling got %v, want ticket %s cancelled", again, tx.GetTicketId())
	}

	// Once matched, the player may wait for another game in another pool.
	tb := e.enter(e.mm[0], b, &matchmakingv1.EnterQueueRequest{Kind: janggi})
	if got := waitTicket(t, e.mm[1], a, tj.GetTicketId(), 10*time.Second); got.GetState() != matched {
		t.Fatalf("ticket %v: want matched", got)
	}
	waitTicket(t, e.mm[0], b, tb.GetTicketId(), 10*time.Second)
	e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{Kind: xiangqi})
}

// Entries of one player racing into different pools through two replicas:
// exactly one ticket waits, whichever wins; the others are refused, as
// entries of a player who waits elsewhere (AlreadyExists), or as ones that
// lost the race and may retry (Aborted).
func TestRacingEntriesLeaveOneTicketWaiting(t *testing.T) {
	e := newEnv(t, 2, nil)
	pools := []*matchmakingv1.EnterQueueRequest{{Kind: xiangqi}, {Kind: janggi}, {Kind: xiangqi, TimeControl: fischer(time.Minute, 0)}}
	for round := range 20 {
		p := e.guest(fmt.Sprintf("Racer%d", round))
		var wg sync.WaitGroup
		tickets := make([]*matchmakingv1.Ticket, len(pools))
		errs := make([]error, len(pools))
		for i, pool := range pools {
			wg.Go(func() {
				req := &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: pool.Kind, TimeControl: pool.TimeControl}
				r, err := e.mm[i%2].EnterQueue(p.ctx(), req)
				tickets[i], errs[i] = r.GetTicket(), err
			})
		}
		wg.Wait()
		entered := 0
		for i, err := range errs {
			switch codeOf(err) {
			case codes.OK:
				entered++
			case codes.AlreadyExists, codes.Aborted:
			default:
				t.Fatalf("round %d, pool %d: %v", round, i, err)
			}
		}
		if entered != 1 {
			t.Fatalf("round %d: %d tickets entered (%v), want exactly 1", round, entered, errs)
		}
		for i, tk := range tickets {
			if tk != nil {
				if _, err := e.mm[i%2].CancelTicket(p.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: tk.GetTicketId()}); err != nil {
					t.Fatalf("round %d: cancel: %v", round, err)
				}
			}
		}
	}
}

func TestQueueValidation(t *testing.T) {
	e := newEnv(t, 1, nil)
	g := e.guest("Guest")
	acct := e.account("3001", "Acct")
	cancelledCtx, cancel := context.WithCancel(g.ctx())
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		req      *matchmakingv1.EnterQueueRequest
		wantCode codes.Code
	}{
		{name: "guest asks for a rated game", ctx: g.ctx(), req: &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi, Rated: true}, wantCode: codes.PermissionDenied},
		{name: "account asks for a rated game", ctx: acct.ctx(), req: &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi, Rated: true}, wantCode: codes.OK},
		{name: "no kind", ctx: g.ctx(), req: &matchmakingv1.EnterQueueRequest{RequestId: rid()}, wantCode: codes.InvalidArgument},
		{name: "no request id", ctx: g.ctx(), req: &matchmakingv1.EnterQueueRequest{Kind: janggi}, wantCode: codes.InvalidArgument},
		{name: "brace in request id", ctx: g.ctx(), req: &matchmakingv1.EnterQueueRequest{RequestId: "a{b}", Kind: janggi}, wantCode: codes.InvalidArgument},
		{name: "bad time control", ctx: g.ctx(), req: &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi, TimeControl: fischer(0, 0)}, wantCode: codes.InvalidArgument},
		{name: "casual rating out of range", ctx: g.ctx(), req: &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi, CasualRating: 5000}, wantCode: codes.InvalidArgument},
		{name: "no credential", ctx: context.Background(), req: &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi}, wantCode: codes.Unauthenticated},
		{name: "cancelled context", ctx: cancelledCtx, req: &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi}, wantCode: codes.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.mm[0].EnterQueue(tt.ctx, tt.req)
			wantCode(t, err, tt.wantCode)
		})
	}
}

func TestCancelTicket(t *testing.T) {
	e := newEnv(t, 1, nil)
	a, b := e.guest("Alice"), e.guest("Bob")
	ta := e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{Kind: xiangqi})

	// A watcher sees the cancellation and its stream ends.
	got := make(chan *matchmakingv1.Ticket, 1)
	go func() { got <- waitTicket(t, e.mm[0], a, ta.GetTicketId(), 10*time.Second) }()
	time.Sleep(50 * time.Millisecond)

	_, err := e.mm[0].CancelTicket(b.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: ta.GetTicketId()})
	wantCode(t, err, codes.PermissionDenied)
	_, err = e.mm[0].WatchTicket(b.ctx(), &matchmakingv1.WatchTicketRequest{TicketId: ta.GetTicketId()})
	if err == nil {
		st, _ := e.mm[0].WatchTicket(b.ctx(), &matchmakingv1.WatchTicketRequest{TicketId: ta.GetTicketId()})
		_, err = st.Recv()
	}
	wantCode(t, err, codes.PermissionDenied)

	r, err := e.mm[0].CancelTicket(a.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: ta.GetTicketId()})
	if err != nil || r.GetTicket().GetState() != cancelled {
		t.Fatalf("CancelTicket: %v %v", r, err)
	}
	if last := <-got; last.GetState() != cancelled {
		t.Fatalf("watcher ended with %v, want cancelled", last)
	}
	// Cancelling again is harmless.
	if _, err := e.mm[0].CancelTicket(a.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: ta.GetTicketId()}); err != nil {
		t.Fatalf("second cancel: %v", err)
	}
	// The cancelled ticket is never paired: Bob keeps waiting alone.
	tb := e.enter(e.mm[0], b, &matchmakingv1.EnterQueueRequest{Kind: xiangqi})
	time.Sleep(200 * time.Millisecond)
	if _, err := e.mm[0].CancelTicket(b.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: tb.GetTicketId()}); err != nil {
		t.Fatalf("Bob's ticket was paired with a cancelled one: %v", err)
	}
	// Re-entering after a cancel works.
	a2 := e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{Kind: xiangqi})
	b2 := e.enter(e.mm[0], b, &matchmakingv1.EnterQueueRequest{Kind: xiangqi})
	if r := waitTicket(t, e.mm[0], a, a2.GetTicketId(), 10*time.Second); r.GetState() != matched {
		t.Fatalf("re-entered ticket ended %v", r)
	}
	// Too late to cancel a matched ticket.
	_, err = e.mm[0].CancelTicket(b.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: b2.GetTicketId()})
	wantCode(t, err, codes.FailedPrecondition)

	for _, id := range []string{"", "nope", "0123456789abcdef.0123456789abcdef"} {
		_, err := e.mm[0].CancelTicket(a.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: id})
		if c := codeOf(err); c != codes.InvalidArgument && c != codes.NotFound {
			t.Fatalf("cancel %q: %v", id, err)
		}
	}
}

func TestTicketExpires(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.TicketTTL = 300 * time.Millisecond })
	a := e.guest("Lonely")
	ta := e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{})
	if ttl := ta.GetExpiresAt().AsTime().Sub(ta.GetEnteredAt().AsTime()); ttl != 300*time.Millisecond {
		t.Fatalf("the ticket expires %v after its entry, want the ticket TTL", ttl)
	}
	if r := waitTicket(t, e.mm[0], a, ta.GetTicketId(), 10*time.Second); r.GetState() != expired {
		t.Fatalf("ticket ended %v, want expired", r)
	}
	// An expired ticket is out of the pool: a newcomer is not paired with it.
	b := e.guest("Late")
	tb := e.enter(e.mm[0], b, &matchmakingv1.EnterQueueRequest{})
	time.Sleep(100 * time.Millisecond)
	if _, err := e.mm[0].CancelTicket(b.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: tb.GetTicketId()}); err != nil {
		t.Fatalf("paired with an expired ticket: %v", err)
	}
}

func TestPairingPrefersCloseRatings(t *testing.T) {
	// No widening: a pair must be within 50 points, so the outcome cannot
	// depend on how the entries fall between pairing passes.
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.PairingWindow, c.PairingWiden = 50, 0 })
	ratings := []int32{1000, 1510, 1030, 1480}
	ps := make([]player, len(ratings))
	ids := make([]string, len(ratings))
	for i, r := range ratings {
		ps[i] = e.guest(fmt.Sprintf("P%d", r))
		ids[i] = e.enter(e.mm[0], ps[i], &matchmakingv1.EnterQueueRequest{CasualRating: r}).GetTicketId()
	}
	opp := map[string]string{}
	for i := range ps {
		r := waitTicket(t, e.mm[0], ps[i], ids[i], 10*time.Second)
		opp[ps[i].name] = r.GetSeat().GetOpponentName()
	}
	if opp["P1000"] != "P1030" || opp["P1510"] != "P1480" {
		t.Fatalf("pairs %v: want 1000-1030 and 1480-1510", opp)
	}
}

func TestPairingWindowWidensWithWait(t *testing.T) {
	// 400 points apart: out of the 100-point window at first, within it
	// after about (400-100)/300 = 1 s of waiting.
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.PairingWindow, c.PairingWiden = 100, 300 })
	a, b := e.guest("Low"), e.guest("High")
	start := time.Now()
	ta := e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{CasualRating: 1000})
	e.enter(e.mm[0], b, &matchmakingv1.EnterQueueRequest{CasualRating: 1400})
	r := waitTicket(t, e.mm[0], a, ta.GetTicketId(), 10*time.Second)
	took := time.Since(start)
	if r.GetState() != matched {
		t.Fatalf("ended %v", r)
	}
	if took < 800*time.Millisecond || took > 3*time.Second {
		t.Fatalf("paired after %v: want about 1 s, when the window reached 400", took)
	}
}

func TestConcurrentMatchmakersNeverPairTwice(t *testing.T) {
	// Three replicas run the pairing loop every 2 ms against the same pools
	// while 240 players enter through all of them at once. They are all
	// guests from one address, so the bound on guests is off.
	e := newEnv(t, 3, func(c *matchmaking.Config) { c.PairingInterval, c.MaxGuests = 2*time.Millisecond, 0 })
	const n = 240
	type entry struct {
		p    player
		pool int
		t    *matchmakingv1.Ticket
	}
	entries := make([]entry, n)
	for i := range entries {
		entries[i] = entry{p: e.guest(fmt.Sprintf("P%d", i)), pool: i % 2}
	}
	var wg sync.WaitGroup
	for i := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			en := &entries[i]
			kind := janggi
			if en.pool == 1 {
				kind = xiangqi
			}
			mm := e.mm[i%3]
			tk := e.enter(mm, en.p, &matchmakingv1.EnterQueueRequest{Kind: kind, CasualRating: int32(800 + (i*37)%1400)})
			en.t = waitTicket(t, e.mm[(i+1)%3], en.p, tk.GetTicketId(), 30*time.Second)
		}()
	}
	wg.Wait()
	byGame := map[string][]entry{}
	for _, en := range entries {
		if en.t.GetState() != matched {
			t.Fatalf("%s ended %v", en.p.name, en.t)
		}
		byGame[en.t.GetSeat().GetGameId()] = append(byGame[en.t.GetSeat().GetGameId()], en)
	}
	if len(byGame) != n/2 {
		t.Fatalf("%d games for %d tickets, want %d", len(byGame), n, n/2)
	}
	for id, es := range byGame {
		if len(es) != 2 {
			t.Fatalf("game %s has %d tickets", id, len(es))
		}
		a, b := es[0], es[1]
		if a.p.id == b.p.id || a.pool != b.pool || a.t.GetSeat().GetSide() == b.t.GetSeat().GetSide() {
			t.Fatalf("game %s pairs %v and %v", id, a, b)
		}
		if a.t.GetSeat().GetOpponentId() != b.p.id || b.t.GetSeat().GetOpponentId() != a.p.id {
			t.Fatalf("game %s: opponents disagree", id)
		}
		// The game service agrees on who sits where.
		g := e.gameAs(t, a.t.GetSeat())
		for _, s := range g.GetSeats() {
			want := b.p.id
			if s.GetSide() == a.t.GetSeat().GetSide() {
				want = a.p.id
			}
			if s.GetPlayerId() != want {
				t.Fatalf("game %s seat %v: want %s", id, s, want)
			}
		}
	}
}

// TestLongNamesStillGetAGame: every name a player can hold must fit the
// game service's limit on a seat's name, or each game made for its holder
// is refused and the pair waits in vain. The longest Google profile name
// is cut to fit; a credential signed before names were checked in bytes
// is cut when its game is made.
func TestLongNamesStillGetAGame(t *testing.T) {
	e := newEnv(t, 1, nil)
	const nameBytes = 96            // the game service's limit on a seat's name
	long := strings.Repeat("장", 40) // 120 bytes
	account := e.account("2001", long)
	if len(account.name) > nameBytes || !strings.HasPrefix(long, account.name) {
		t.Fatalf("Google name %q (%d bytes): want a prefix of at most %d bytes", account.name, len(account.name), nameBytes)
	}
	ring, err := auth.ParseKeyring(e.cfg.SigningKeys)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := ring.Sign(auth.Claims{Kind: auth.KindGuest, Subject: "guest-0123456789abcdef01234567", Name: long, IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	old := player{id: "guest-0123456789abcdef01234567", name: long, token: tok}
	ta := e.enter(e.mm[0], account, &matchmakingv1.EnterQueueRequest{})
	tb := e.enter(e.mm[0], old, &matchmakingv1.EnterQueueRequest{})
	ra := waitTicket(t, e.mm[0], account, ta.GetTicketId(), 10*time.Second)
	rb := waitTicket(t, e.mm[0], old, tb.GetTicketId(), 10*time.Second)
	if ra.GetState() != matched || rb.GetState() != matched {
		t.Fatalf("states %v, %v: want both matched", ra.GetState(), rb.GetState())
	}
	for _, s := range e.gameAs(t, rb.GetSeat()).GetSeats() {
		if n := s.GetDisplayName(); len(n) > nameBytes || !strings.HasPrefix(long, n) || n == "" {
			t.Fatalf("seat name %q: want a prefix of the long name within %d bytes", n, nameBytes)
		}
	}
}

// TestRetryAfterTheTicketExpired: a request id is remembered longer than
// its ticket lives; a retry after the ticket is gone is told so.
func TestRetryAfterTheTicketExpired(t *testing.T) {
	e := newEnv(t, 1, nil)
	a := e.guest("Alice")
	req := &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi}
	ta := e.enter(e.mm[0], a, req)
	tag, err := store.TicketTag(ta.GetTicketId())
	if err != nil {
		t.Fatal(err)
	}
	// What the ticket's expiry does, without waiting for it.
	if err := e.game.Redis.Del(context.Background(), e.cfg.KeyPrefix+"mm:{p:"+tag+"}:t:"+ta.GetTicketId()).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = e.mm[0].EnterQueue(a.ctx(), req)
	wantCode(t, err, codes.NotFound)
	if !strings.Contains(err.Error(), "new request_id") {
		t.Fatalf("retry of an expired ticket: %v, want a message naming a new request_id", err)
	}
}

// TestMatchSequenceExpires: a pool's match counter is kept only as long
// as the matches it numbered, not for ever.
func TestMatchSequenceExpires(t *testing.T) {
	e := newEnv(t, 1, nil)
	a, b := e.guest("Alice"), e.guest("Bob")
	ta := e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{})
	e.enter(e.mm[0], b, &matchmakingv1.EnterQueueRequest{})
	if r := waitTicket(t, e.mm[0], a, ta.GetTicketId(), 10*time.Second); r.GetState() != matched {
		t.Fatalf("state %v, want matched", r.GetState())
	}
	tag, err := store.TicketTag(ta.GetTicketId())
	if err != nil {
		t.Fatal(err)
	}
	if d := e.game.Redis.TTL(context.Background(), e.cfg.KeyPrefix+"mm:{p:"+tag+"}:seq").Val(); d <= 0 {
		t.Fatalf("the pool's match sequence expires in %v, want a TTL", d)
	}
}

// TestPoolsAreBounded: any time control makes a queue of its own, and
// every replica pairs every queue ten times a second, so one client must
// not be able to make the pairing pass grow without bound. Queues already
// served keep taking tickets.
func TestPoolsAreBounded(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxPools = 3 })
	// A player waits in one pool at a time; guests are free to make.
	var g player
	for i := range 4 {
		g = e.guest(fmt.Sprintf("Spammer%d", i))
		if i < 3 {
			e.enter(e.mm[0], g, &matchmakingv1.EnterQueueRequest{TimeControl: fischer(time.Minute+time.Duration(i)*time.Second, 0)})
		}
	}
	before, err := e.game.Redis.Keys(context.Background(), e.cfg.KeyPrefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.mm[0].EnterQueue(g.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi, TimeControl: fischer(time.Hour, 0)})
	wantCode(t, err, codes.ResourceExhausted)
	if !strings.Contains(err.Error(), "time control") {
		t.Fatalf("refusal %v: want a message naming the time control", err)
	}
	after, err := e.game.Redis.Keys(context.Background(), e.cfg.KeyPrefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("the refused ticket changed Redis: %d keys, %d before", len(after), len(before))
	}
	// Another player still gets into a queue that is served, and is paired.
	b := e.guest("Bob")
	tb := e.enter(e.mm[0], b, &matchmakingv1.EnterQueueRequest{TimeControl: fischer(time.Minute, 0)})
	if r := waitTicket(t, e.mm[0], b, tb.GetTicketId(), 10*time.Second); r.GetState() != matched {
		t.Fatalf("a ticket in a served queue: %v, want matched", r.GetState())
	}
	// The default time control is always served, whatever custom ones
	// filled the bound: one player cannot lock everyone out of the queue.
	for _, kind := range []commonv1.GameKind{xiangqi, janggi} {
		e.enter(e.mm[0], e.guest("Carol"), &matchmakingv1.EnterQueueRequest{Kind: kind})
	}
}

// TestARefusedEntryTakesNoPool: an entry refused because its player waits
// in another pool enters no ticket, so it must not take one of the queues
// served at once either: else one waiting player, sending entries with
// other time controls that are all refused, fills the bound and keeps
// every other player out of every custom time control.
func TestARefusedEntryTakesNoPool(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxPools = 2 })
	a := e.guest("Waiter")
	e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{TimeControl: fischer(time.Minute, 0)})
	for i := range 3 {
		_, err := e.mm[0].EnterQueue(a.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi, TimeControl: fischer(2*time.Minute+time.Duration(i)*time.Second, 0)})
		wantCode(t, err, codes.AlreadyExists)
	}
	// The bound has room for one more queue: another player's.
	e.enter(e.mm[0], e.guest("Bob"), &matchmakingv1.EnterQueueRequest{TimeControl: fischer(3*time.Minute, 0)})
}

func TestKeyPrefixWithABraceIsRefused(t *testing.T) {
	t.Parallel()
	cfg := matchmaking.DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	cfg.KeyPrefix = "mm{x}:"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--key-prefix") {
		t.Fatalf("Validate() = %v, want an error naming --key-prefix", err)
	}
}

func TestSeveralGameAddressesAreRefused(t *testing.T) {
	t.Parallel()
	cfg := matchmaking.DefaultConfig()
	cfg.GameAddr = "g1:8080,g2:8080"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--game-addr") {
		t.Fatalf("Validate() = %v, want an error naming --game-addr", err)
	}
}

// TestWatchesSendHeartbeats: a watch with nothing new sends its state
// again, unchanged, after each heartbeat interval, so that a client (a
// browser's fetch reader) can tell a quiet watch from a lost connection.
func TestWatchesSendHeartbeats(t *testing.T) {
	const beat = 300 * time.Millisecond
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.WatchHeartbeat = beat })
	a, b := e.guest("Alice"), e.guest("Bob")
	ticket := e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{Kind: xiangqi})
	inv, err := e.mm[0].CreateInvite(b.ctx(), &matchmakingv1.CreateInviteRequest{RequestId: rid(), Kind: janggi})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	heartbeats := func(name string, recv func() (string, error)) {
		t.Helper()
		first, err := recv()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		start := time.Now()
		for range 3 {
			again, err := recv()
			if err != nil || again != first {
				t.Fatalf("%s: heartbeat %q, %v; want the state %q again", name, again, err, first)
			}
		}
		if took := time.Since(start); took < 2*beat || took > 3*beat+2*time.Second {
			t.Fatalf("%s: three heartbeats took %v, want about %v", name, took, 3*beat)
		}
	}
	tickets, err := e.mm[0].WatchTicket(metadata.NewOutgoingContext(ctx, metadata.Pairs("authorization", "Bearer "+a.token)), &matchmakingv1.WatchTicketRequest{TicketId: ticket.GetTicketId()})
	if err != nil {
		t.Fatal(err)
	}
	heartbeats("ticket", func() (string, error) { m, err := tickets.Recv(); return m.GetTicket().GetState().String(), err })
	invites, err := e.mm[0].WatchInvite(metadata.NewOutgoingContext(ctx, metadata.Pairs("authorization", "Bearer "+b.token)), &matchmakingv1.WatchInviteRequest{Token: inv.GetInvite().GetToken()})
	if err != nil {
		t.Fatal(err)
	}
	heartbeats("invite", func() (string, error) { m, err := invites.Recv(); return m.GetInvite().GetState().String(), err })
}

// A ticket's instants read alike from EnterQueue and from WatchTicket,
// which reads the store: a client may compare them.
func TestATicketReadsAlikeWhereverItIsRead(t *testing.T) {
	e := newEnv(t, 1, nil)
	a := e.guest("Alice")
	entered := e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{Kind: xiangqi})
	ctx, cancel := context.WithTimeout(a.ctx(), 10*time.Second)
	defer cancel()
	st, err := e.mm[0].WatchTicket(ctx, &matchmakingv1.WatchTicketRequest{TicketId: entered.GetTicketId()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	watched := m.GetTicket()
	if !proto.Equal(watched.GetEnteredAt(), entered.GetEnteredAt()) || !proto.Equal(watched.GetExpiresAt(), entered.GetExpiresAt()) {
		t.Fatalf("EnterQueue answered entered %v, expires %v; WatchTicket reads %v, %v",
			entered.GetEnteredAt().AsTime(), entered.GetExpiresAt().AsTime(), watched.GetEnteredAt().AsTime(), watched.GetExpiresAt().AsTime())
	}
}

// TestRequestIDsAreEachPlayersOwn: a player id and a request id are joined
// in the keys that remember a request, so "77" asking "1:r" and "77:1"
// asking "r" read alike there (ids may hold a colon: OpenID allows any
// subject). The first is refused, never answered with the other's ticket
// or invite.
func TestRequestIDsAreEachPlayersOwn(t *testing.T) {
	e := newEnv(t, 1, nil)
	mm := e.mm[0]
	victim, other := e.account("77:1", "Victim"), e.account("77", "Other")
	vt := e.enter(mm, victim, &matchmakingv1.EnterQueueRequest{RequestId: "r"})
	r, err := mm.EnterQueue(other.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: "1:r", Kind: janggi})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `request_id "1:r" cannot be used`) {
		t.Fatalf("the other player's entry: %v %v, want InvalidArgument (the victim's ticket is %s)", r, err, vt.GetTicketId())
	}
	inv, err := mm.CreateInvite(victim.ctx(), &matchmakingv1.CreateInviteRequest{RequestId: "i", Kind: janggi})
	if err != nil {
		t.Fatal(err)
	}
	got, err := mm.CreateInvite(other.ctx(), &matchmakingv1.CreateInviteRequest{RequestId: "1:i", Kind: janggi})
	if status.Code(err) != codes.InvalidArgument || got.GetInvite().GetToken() == inv.GetInvite().GetToken() {
		t.Fatalf("the other player's invite: %v %v, want InvalidArgument", got, err)
	}
}
