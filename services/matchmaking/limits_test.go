package matchmaking_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/apierr"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking"
)

// retryAfter is the retry_after_ms of a refusal's ErrorInfo, 0 without.
func retryAfter(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			ms, _ := strconv.ParseInt(info.GetMetadata()["retry_after_ms"], 10, 64)
			return time.Duration(ms) * time.Millisecond
		}
	}
	return 0
}

// TestPlayersMakeBoundedNumbers: one player starts at most so many games
// against the AI, and creates at most so many invites, in an hour. The
// refusal says when there is room and makes nothing; a retry of a request
// admitted before is answered as before, and its request id makes no
// other game; other players and the other kind count apart.
func TestPlayersMakeBoundedNumbers(t *testing.T) {
	// Bounds apart, so that each is seen to bound its own kind.
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxAIGames, c.MaxInvites = 2, 3 })
	g, h := e.guest("Busy"), e.guest("Other")
	mm := e.mm[0]
	playAi := func(p player, req string) (*matchmakingv1.PlayAiResponse, error) {
		return mm.PlayAi(p.ctx(), &matchmakingv1.PlayAiRequest{RequestId: req, Kind: janggi, Level: 1})
	}
	first, err := playAi(g, "ai-1")
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Minute)
	if _, err := playAi(g, "ai-2"); err != nil {
		t.Fatal(err)
	}
	_, err = playAi(g, "ai-3")
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "you made the most allowed, 2 games against the AI, in the last 1h0m0s") ||
		!strings.Contains(err.Error(), "the next may be made in 50m0s") {
		t.Fatalf("a third game within the hour: %v, want ResourceExhausted saying when", err)
	}
	if apierr.ReasonOf(err) != "RATE_LIMITED" || retryAfter(err) != 50*time.Minute {
		t.Fatalf("reason %q, retry after %v: want RATE_LIMITED and 50m", apierr.ReasonOf(err), retryAfter(err))
	}
	list, err := mm.ListGames(g.ctx(), &matchmakingv1.ListGamesRequest{})
	if err != nil || len(list.GetGames()) != 2 {
		t.Fatalf("after the refusal the player has %d games (%v), want 2", len(list.GetGames()), err)
	}
	again, err := playAi(g, "ai-1")
	if err != nil || again.GetSeat().GetGameId() != first.GetSeat().GetGameId() {
		t.Fatalf("a retry of the first request: %v %v, want its game", again, err)
	}
	// The same request id asking for another game makes none: the game
	// service would make another game of it, uncounted.
	for level := uint32(2); level <= 4; level++ {
		_, err := mm.PlayAi(g.ctx(), &matchmakingv1.PlayAiRequest{RequestId: "ai-1", Kind: janggi, Level: level})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `request_id "ai-1" was used for another request`) {
			t.Fatalf("ai-1 again at level %d: %v, want InvalidArgument", level, err)
		}
	}
	if list, err := mm.ListGames(g.ctx(), &matchmakingv1.ListGamesRequest{}); err != nil || len(list.GetGames()) != 2 {
		t.Fatalf("after reusing a request id the player has %d games (%v), want 2", len(list.GetGames()), err)
	}
	if _, err := playAi(h, "ai-3"); err != nil {
		t.Fatalf("another player is refused: %v", err)
	}

	invite := func(req string) error {
		_, err := mm.CreateInvite(g.ctx(), &matchmakingv1.CreateInviteRequest{RequestId: req, Kind: janggi})
		return err
	}
	for _, r := range []string{"inv-1", "inv-2", "inv-3"} {
		if err := invite(r); err != nil {
			t.Fatalf("invites count apart from AI games: %v", err)
		}
	}
	if err := invite("inv-4"); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "you made the most allowed, 3 invites,") {
		t.Fatalf("a fourth invite: %v", err)
	}
	if err := invite("inv-2"); err != nil {
		t.Fatalf("a retry of an invite: %v", err)
	}

	// Once the first game leaves the hour, there is room for one.
	e.clock.Advance(50 * time.Minute)
	if _, err := playAi(g, "ai-3"); err != nil {
		t.Fatalf("after the time said: %v", err)
	}
	if _, err := playAi(g, "ai-4"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("the next: %v, want ResourceExhausted", err)
	}
}

// TestRetriesAreNeverCountedAgain: a retry of an admitted request is
// answered with what it made however long after, not counted anew once
// its hour has passed and refused.
func TestRetriesAreNeverCountedAgain(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxAIGames, c.MaxInvites = 1, 1 })
	p := e.guest("Patient")
	mm := e.mm[0]
	first, err := mm.PlayAi(p.ctx(), &matchmakingv1.PlayAiRequest{RequestId: "r1", Kind: janggi, Level: 1})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := mm.CreateInvite(p.ctx(), &matchmakingv1.CreateInviteRequest{RequestId: "i1", Kind: janggi})
	if err != nil {
		t.Fatal(err)
	}
	// An hour on, the bounds are taken by newer requests.
	e.clock.Advance(61 * time.Minute)
	if _, err := mm.PlayAi(p.ctx(), &matchmakingv1.PlayAiRequest{RequestId: "r2", Kind: janggi, Level: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := mm.CreateInvite(p.ctx(), &matchmakingv1.CreateInviteRequest{RequestId: "i2", Kind: janggi}); err != nil {
		t.Fatal(err)
	}
	again, err := mm.PlayAi(p.ctx(), &matchmakingv1.PlayAiRequest{RequestId: "r1", Kind: janggi, Level: 1})
	if err != nil || again.GetSeat().GetGameId() != first.GetSeat().GetGameId() {
		t.Fatalf("a retry of r1 after its hour: %v %v, want its game", again, err)
	}
	invAgain, err := mm.CreateInvite(p.ctx(), &matchmakingv1.CreateInviteRequest{RequestId: "i1", Kind: janggi})
	if err != nil || invAgain.GetInvite().GetToken() != inv.GetInvite().GetToken() {
		t.Fatalf("a retry of i1 after its hour: %v %v, want its invite", invAgain, err)
	}
}

// TestARenamedPlayerCannotReuseARequestID: an account that signs in again
// under another name sends the same request id: the game service would
// make another game of it (the name is part of the game), so it is
// refused rather than taken for a retry, uncounted.
func TestARenamedPlayerCannotReuseARequestID(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxAIGames = 1 })
	ann, annie := e.account("9101", "Ann"), e.account("9101", "Annie")
	if ann.id != annie.id {
		t.Fatalf("one account, two ids: %s %s", ann.id, annie.id)
	}
	req := &matchmakingv1.PlayAiRequest{RequestId: "same", Kind: janggi, Level: 1}
	if _, err := e.mm[0].PlayAi(ann.ctx(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := e.mm[0].PlayAi(annie.ctx(), req); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("the same request id under another name: %v, want InvalidArgument", err)
	}
	if n := len(e.listGames(ann, 0)); n != 1 {
		t.Fatalf("%d games listed, want 1", n)
	}
}

// TestABoundOfOneIsNamedSo: the refusal of a bound of one speaks of one
// invite, not of "1 invites".
func TestABoundOfOneIsNamedSo(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxInvites = 1 })
	g := e.guest("Once")
	for i, want := range []string{"", "you made the most allowed, 1 invite, in the last 1h0m0s"} {
		_, err := e.mm[0].CreateInvite(g.ctx(), &matchmakingv1.CreateInviteRequest{RequestId: rid(), Kind: janggi})
		if (want == "") != (err == nil) || (want != "" && !strings.Contains(err.Error(), want)) {
			t.Fatalf("invite %d: %v, want %q", i, err, want)
		}
	}
}

// TestBoundsAreValidated: a negative bound is refused at start; 0 turns
// the bound off.
func TestBoundsAreValidated(t *testing.T) {
	c := matchmaking.DefaultConfig()
	c.MaxAIGames = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--max-ai-games-per-hour") {
		t.Fatalf("Validate() = %v, want an error naming the flag", err)
	}
	c.MaxAIGames, c.MaxEntries = 0, -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--max-queue-entries-per-hour") {
		t.Fatalf("Validate() = %v, want an error naming the flag", err)
	}
	c.MaxAIGames, c.MaxInvites, c.MaxEntries = 0, 0, 0
	if err := c.Validate(); err != nil {
		t.Fatalf("no bounds: %v", err)
	}
	for _, u := range []string{"https://www.googleapis.com/oauth2/v3/certs", "http://127.0.0.1:7340/", "http://[::1]:80/k", "http://localhost/k"} {
		c := matchmaking.DefaultConfig()
		c.GoogleClientIDs, c.GoogleJWKSURL = "app", u
		if err := c.Validate(); err != nil {
			t.Errorf("--google-jwks-url %s: %v", u, err)
		}
	}
	for name, edit := range map[string]func(*matchmaking.Config){
		"--max-guests-per-hour":       func(c *matchmaking.Config) { c.MaxGuests = -1 },
		"--max-aborts-per-hour":       func(c *matchmaking.Config) { c.MaxAborts = -1 },
		`"proxy.internal" is neither`: func(c *matchmaking.Config) { c.TrustedProxies = "10.0.0.0/8,proxy.internal" },
		"--trusted-proxy-hops":        func(c *matchmaking.Config) { c.TrustedProxyHops = -1 },
		// A match's record is kept an hour from its pairing.
		"--give-up-after 1h0m0s: at most 30m0s": func(c *matchmaking.Config) { c.GiveUpAfter = time.Hour },
		// A match is given up once its creation is taken over, after 5 s:
		// one of a second was given up after 5 to 7.5 s.
		"--give-up-after 1s: at least 10s": func(c *matchmaking.Config) { c.GiveUpAfter = time.Second },
		// NaN passes a "< 0" check, and a NaN window paired no two
		// tickets ever.
		"--pairing-window, --pairing-widen and --pairing-max-window must be finite": func(c *matchmaking.Config) { c.PairingWindow = math.NaN() },
		"--pairing-max-window must be finite":                                       func(c *matchmaking.Config) { c.PairingMaxWindow = math.Inf(1) },
		// Renewed every third of it, by a ticker that refuses no interval.
		"--rating-lease 2ns: at least 100ms": func(c *matchmaking.Config) { c.RatingLease = 2 },
		// Every call to the game service would fail at once.
		"--matchmaking-call-timeout must be positive": func(c *matchmaking.Config) { c.CallTimeout = -time.Second },
		"want an https URL": func(c *matchmaking.Config) {
			c.GoogleClientIDs, c.GoogleJWKSURL = "app", "http://keys.example/jwks"
		},
	} {
		c := matchmaking.DefaultConfig()
		edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Validate() = %v, want an error saying %s", err, name)
		}
	}
}

// from is a context whose calls say, as a proxy would, that they were
// forwarded for the client at addr.
func from(addr string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", addr)
}

// TestGuestsAreBoundedPerAddress: one client address creates at most so
// many guests in an hour, however it names itself; for IPv6 the address
// is its /56. The calls reach the service from loopback, a trusted proxy
// by default, which names the client in X-Forwarded-For.
func TestGuestsAreBoundedPerAddress(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxGuests = 2 })
	mm := e.mm[0]
	guest := func(ctx context.Context, name string) error {
		_, err := mm.CreateGuest(ctx, &matchmakingv1.CreateGuestRequest{Nickname: name})
		return err
	}
	// Refused nicknames count for nothing.
	for range 3 {
		if err := guest(from("203.0.113.7"), " "); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("a blank nickname: %v, want InvalidArgument", err)
		}
	}
	for _, name := range []string{"One", "Two"} {
		if err := guest(from("203.0.113.7"), name); err != nil {
			t.Fatalf("guest %s: %v", name, err)
		}
	}
	refused := func(ctx context.Context, who string) {
		t.Helper()
		err := guest(ctx, "Three")
		if status.Code(err) != codes.ResourceExhausted || apierr.ReasonOf(err) != "RATE_LIMITED" ||
			!strings.Contains(err.Error(), "your network address ("+who+") made the most allowed, 2 guests, in the last 1h0m0s: the next may be made in") {
			t.Fatalf("a third guest from %s: %v, want ResourceExhausted naming the address", who, err)
		}
		if w := retryAfter(err); w <= 0 || w > time.Hour {
			t.Fatalf("retry after %v", w)
		}
	}
	refused(from("203.0.113.7"), "203.0.113.7")
	// What the client itself wrote before the proxy's entry is not believed.
	refused(from("198.51.100.1, 203.0.113.7"), "203.0.113.7")
	if err := guest(from("203.0.113.8"), "Neighbour"); err != nil {
		t.Fatalf("another address is refused: %v", err)
	}
	// A new IPv6 address in the same /56 is the same client.
	for _, a := range []string{"2001:db8:1:2::1", "2001:db8:1:3::2"} {
		if err := guest(from(a), "Six"); err != nil {
			t.Fatal(err)
		}
	}
	refused(from("2001:db8:1:ff:ffff::3"), "2001:db8:1::/56")
	if err := guest(from("2001:db8:1:100::1"), "Six"); err != nil {
		t.Fatalf("another /56 is refused: %v", err)
	}
	// Connect and gRPC-Web calls reach the service through another
	// transport, and read the same header.
	connect := func(xff string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, "http://"+e.addrs[0]+"/palace.matchmaking.v1.MatchmakingService/CreateGuest", strings.NewReader(`{"nickname":"Web"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Connect-Protocol-Version", "1")
		req.Header.Set("X-Forwarded-For", xff)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := connect("203.0.113.7"); code != http.StatusTooManyRequests || !strings.Contains(body, "your network address (203.0.113.7)") {
		t.Fatalf("over Connect from a refused address: %d %s", code, body)
	}
	if code, body := connect("203.0.113.50"); code != http.StatusOK || !strings.Contains(body, `"token"`) {
		t.Fatalf("over Connect from another address: %d %s", code, body)
	}
	// Once the hour has passed there is room again.
	e.clock.Advance(61 * time.Minute)
	if err := guest(from("203.0.113.7"), "Later"); err != nil {
		t.Fatalf("an hour on: %v", err)
	}
}

// TestAnUntrustedPeerIsTheClient: with loopback not among the trusted
// proxies, X-Forwarded-For is the caller's own say, and every call counts
// against the peer's address.
func TestAnUntrustedPeerIsTheClient(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxGuests, c.TrustedProxies = 2, "10.0.0.0/8" })
	for i, a := range []string{"203.0.113.1", "203.0.113.2"} {
		if _, err := e.mm[0].CreateGuest(from(a), &matchmakingv1.CreateGuestRequest{Nickname: "Guest"}); err != nil {
			t.Fatalf("guest %d: %v", i, err)
		}
	}
	_, err := e.mm[0].CreateGuest(from("203.0.113.3"), &matchmakingv1.CreateGuestRequest{Nickname: "Guest"})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "your network address (127.0.0.1)") {
		t.Fatalf("a third guest from loopback: %v, want ResourceExhausted naming 127.0.0.1", err)
	}
	if strings.Contains(e.logs.String(), "proxies in front do not pass") {
		t.Fatalf("loopback is no proxy here, yet:\n%s", e.logs)
	}
}

// TestGuestsRefusedToAProxyAreLogged: a proxy that does not pass its
// clients' addresses on makes them all one client; the operator is told,
// once a minute however many are refused.
func TestGuestsRefusedToAProxyAreLogged(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxGuests = 1 })
	for i := range 4 {
		_, err := e.mm[0].CreateGuest(context.Background(), &matchmakingv1.CreateGuestRequest{Nickname: "Guest"})
		if (i == 0) != (err == nil) {
			t.Fatalf("guest %d: %v", i, err)
		}
	}
	if n := strings.Count(e.logs.String(), "guests refused to a proxy's address"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, e.logs)
	}
}

// TestAnInviteRequestIDIsHeldToItsInvite: a retry of CreateInvite gets its
// invite back, but the same request id asking for another invite (another
// kind, time control, or name after a new sign-in) is InvalidArgument, as
// PlayAi's: answering with the first invite would send the friend another
// game than asked. Nothing more is counted against the bound.
func TestAnInviteRequestIDIsHeldToItsInvite(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxInvites = 2 })
	ann, annie := e.account("9201", "Ann"), e.account("9201", "Annie")
	req := &matchmakingv1.CreateInviteRequest{RequestId: "same", Kind: xiangqi}
	first, err := e.mm[0].CreateInvite(ann.ctx(), req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.mm[0].CreateInvite(ann.ctx(), req)
	if err != nil || again.GetInvite().GetToken() != first.GetInvite().GetToken() {
		t.Fatalf("a retry: %v %v, want the first invite", again, err)
	}
	for name, other := range map[string]struct {
		p   player
		req *matchmakingv1.CreateInviteRequest
	}{
		"another kind":         {ann, &matchmakingv1.CreateInviteRequest{RequestId: "same", Kind: janggi}},
		"another time control": {ann, &matchmakingv1.CreateInviteRequest{RequestId: "same", Kind: xiangqi, TimeControl: fischer(3*time.Minute, 2*time.Second)}},
		"another name":         {annie, req},
	} {
		_, err := e.mm[0].CreateInvite(other.p.ctx(), other.req)
		wantCode(t, err, codes.InvalidArgument)
		if !strings.Contains(err.Error(), `request_id "same" was used for another request`) {
			t.Fatalf("%s: %v, want the message to say the request_id was used", name, err)
		}
	}
	// The refusals counted nothing: one more invite fits the bound of two.
	if _, err := e.mm[0].CreateInvite(ann.ctx(), &matchmakingv1.CreateInviteRequest{RequestId: "other", Kind: janggi}); err != nil {
		t.Fatalf("a second invite under a bound of two: %v", err)
	}
}

// TestQueueEntriesAndRematchOffersAreBounded: one player entered the
// queue and cancelled, over and over, without bound, each entry's ticket
// and request kept an hour past its end; and two players made rematch
// after rematch, each aborted or resigned at once and kept for weeks.
// New tickets and rematch offers are bounded per player as games against
// the AI and invites are; a retry is answered as before, and an offer
// made again for the same game counts once.
func TestQueueEntriesAndRematchOffersAreBounded(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxEntries, c.MaxInvites = 3, 2 })
	mm := e.mm[0]
	g, h := e.guest("Churner"), e.guest("Other")
	enter := func(p player, req string) (*matchmakingv1.EnterQueueResponse, error) {
		return mm.EnterQueue(p.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: req, Kind: janggi})
	}
	var last *matchmakingv1.Ticket
	for _, req := range []string{"q-1", "q-2", "q-3"} {
		r, err := enter(g, req)
		if err != nil {
			t.Fatal(err)
		}
		last = r.GetTicket()
		if _, err := mm.CancelTicket(g.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: last.GetTicketId()}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := enter(g, "q-4")
	if status.Code(err) != codes.ResourceExhausted || apierr.ReasonOf(err) != "RATE_LIMITED" || retryAfter(err) <= 0 ||
		!strings.Contains(err.Error(), "you made the most allowed, 3 queue entries, in the last 1h0m0s") {
		t.Fatalf("a fourth entry within the hour: %v, want ResourceExhausted, RATE_LIMITED, saying when", err)
	}
	if r, err := enter(g, "q-3"); err != nil || r.GetTicket().GetTicketId() != last.GetTicketId() {
		t.Fatalf("a retry of the third entry: %v %v, want its ticket", r, err)
	}
	if _, err := enter(h, "q-4"); err != nil {
		t.Fatalf("another player is refused: %v", err)
	}
	e.clock.Advance(time.Hour)
	if _, err := enter(g, "q-5"); err != nil {
		t.Fatalf("an hour later: %v", err)
	}

	a, b := e.guest("A"), e.guest("B")
	sa, sb := e.friendGame(a, b) // a's one invite
	e.resign(t, sb)
	game := sa.GetGameId()
	for range 2 {
		if _, err := mm.OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: game}); err != nil {
			t.Fatal(err)
		}
		r, err := mm.AcceptRematch(b.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: game})
		if err != nil {
			t.Fatal(err)
		}
		e.resign(t, r.GetRematch().GetSeat())
		game = r.GetRematch().GetSeat().GetGameId()
	}
	_, err = mm.OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: game})
	if status.Code(err) != codes.ResourceExhausted || apierr.ReasonOf(err) != "RATE_LIMITED" ||
		!strings.Contains(err.Error(), "you made the most allowed, 2 rematch offers,") {
		t.Fatalf("a third rematch offer within the hour: %v, want ResourceExhausted, RATE_LIMITED", err)
	}
	if r, err := mm.OfferRematch(b.ctx(), &matchmakingv1.OfferRematchRequest{GameId: game}); err != nil || r.GetRematch().GetState() != matchmakingv1.RematchState_REMATCH_STATE_OFFERED {
		t.Fatalf("the other player's offer, who made none: %v %v", r, err)
	}
	if _, err := mm.OfferRematch(b.ctx(), &matchmakingv1.OfferRematchRequest{GameId: game}); err != nil {
		t.Fatalf("the same offer made again: %v", err)
	}
}

// TestOnePlayerCannotFillRedisWithTickets: a single guest that entered
// the queue and cancelled, over and over, each time with a new
// request_id, left a ticket hash and a request key in Redis for every
// cycle, each kept for --ticket-ttl + 1 h (70 min by default), without
// bound (DESIGN.md 6: "Every queue, buffer and stream has a bound"). With
// the default bound, what one player leaves no longer grows with its
// churn.
func TestOnePlayerCannotFillRedisWithTickets(t *testing.T) {
	e := newEnv(t, 1, nil)
	mm := e.mm[0]
	g := e.guest("Churner")
	cycle := func() error {
		r, err := mm.EnterQueue(g.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi})
		if err != nil {
			return err
		}
		_, err = mm.CancelTicket(g.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: r.GetTicket().GetTicketId()})
		return err
	}
	count := func() int { return len(keysUnder(t, e.cfg.KeyPrefix)) }
	const warm, cycles = 10, 300
	for i := range warm {
		if err := cycle(); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
	}
	before := count()
	refused := 0
	for i := range cycles {
		if err := cycle(); err != nil {
			if codeOf(err).String() == "ResourceExhausted" {
				refused++
				continue
			}
			t.Fatalf("cycle %d: %v", warm+i, err)
		}
	}
	after := count()
	// Two keys a ticket (its hash, its request), for each the bound
	// admits in the hour.
	if most := 2 * matchmaking.DefaultConfig().MaxEntries; refused == 0 || after-before > most {
		t.Errorf("one player's %d enter+cancel cycles added %d Redis keys, %d refused, want at most %d: nothing bounds the tickets and request ids one player leaves behind", cycles, after-before, refused, most)
	}
}

// TestOneRequestIDEntersEveryPoolCounted: the entry bound counted a
// request id once per player, while a request id names an entry per pool
// (Enter's request key holds the pool's tag): reusing one request id in
// pool after pool made a new ticket in each, and counted only the first.
func TestOneRequestIDEntersEveryPoolCounted(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxEntries = 2 })
	mm := e.mm[0]
	g := e.guest("Reuser")
	made := 0
	for i := range 5 {
		r, err := mm.EnterQueue(g.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: "same", Kind: janggi, TimeControl: fischer(time.Duration(10+i)*time.Minute, 0)})
		if codeOf(err) == codes.ResourceExhausted {
			break
		}
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		made++
		if _, err := mm.CancelTicket(g.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: r.GetTicket().GetTicketId()}); err != nil {
			t.Fatal(err)
		}
	}
	if made > 2 {
		t.Errorf("%d new tickets (one per pool, one request_id) admitted under --max-queue-entries-per-hour 2", made)
	}
}

// TestARefusedReuseTakesBackNoOtherEntry: an entry refused after its
// admission (--max-pools full) is taken back; taken back by request id
// alone, it took back the count of the ticket the same request id had
// made in another pool, and the player entered more than the bound.
func TestARefusedReuseTakesBackNoOtherEntry(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxEntries, c.MaxPools = 1, 1 })
	mm := e.mm[0]
	// Someone else's ticket takes the one custom pool served.
	e.enter(mm, e.guest("Other"), &matchmakingv1.EnterQueueRequest{TimeControl: fischer(15*time.Minute, 0)})
	g := e.guest("Reuser")
	r, err := mm.EnterQueue(g.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: "x", Kind: janggi})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mm.CancelTicket(g.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: r.GetTicket().GetTicketId()}); err != nil {
		t.Fatal(err)
	}
	_, err = mm.EnterQueue(g.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: "x", Kind: janggi, TimeControl: fischer(10*time.Minute, 5*time.Second)})
	if codeOf(err) != codes.ResourceExhausted {
		t.Fatalf("entry to a custom pool with --max-pools full: %v, want ResourceExhausted", err)
	}
	_, err = mm.EnterQueue(g.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: "y", Kind: janggi})
	if err == nil {
		t.Errorf("a second new ticket in the hour admitted under --max-queue-entries-per-hour 1: the refused reuse of request id x took back the count of x's ticket")
	}
}

// TestARaceRefusedCallTakesBackNoEntryItsRetryMade: a client retries
// EnterQueue (same request_id) on another replica while its first call is
// still served. The retry claims the player's live-ticket record after the
// first call's claim, and the first call, finding the record taken, was
// refused with ErrRacedEntries and took back the admission, the retry's
// too: the retry's ticket waited counted nowhere, and the player entered
// once more than --max-queue-entries-per-hour.
func TestARaceRefusedCallTakesBackNoEntryItsRetryMade(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxEntries = 1 })
	dial := func(addr string) matchmakingv1.MatchmakingServiceClient {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return matchmakingv1.NewMatchmakingServiceClient(cc)
	}
	pA, pB := redistest.NewProxy(t, e.redis), redistest.NewProxy(t, e.redis)
	addrA, _ := runReplica(t, pA.Addr(), e.cfg)
	addrB, _ := runReplica(t, pB.Addr(), e.cfg)
	mmA, mmB := dial(addrA), dial(addrB)
	g := e.guest("Racer")
	const req = "review-race-req"

	var madeA, freeA, freeB atomic.Bool
	reachedA, reachedB := make(chan struct{}), make(chan struct{})
	var onceA, onceB atomic.Bool
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	poll := func(p *redistest.Proxy, match func([]byte) bool) {
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				p.Pass(match)
			}
		}()
	}
	pA.Hold()
	pB.Hold()
	// A: held at its read of the live-ticket record after its admission.
	poll(pA, func(b []byte) bool {
		s := string(b)
		if freeA.Load() {
			return true
		}
		if strings.Contains(s, "made:entry") {
			madeA.Store(true)
			return true
		}
		if madeA.Load() && strings.Contains(s, "get") && strings.Contains(s, ":live") {
			if onceA.CompareAndSwap(false, true) {
				close(reachedA)
			}
			return false
		}
		return true
	})
	// B: held at its ticket's write.
	poll(pB, func(b []byte) bool {
		s := string(b)
		if freeB.Load() {
			return true
		}
		if strings.Contains(s, "eval") && strings.Contains(s, req) && !strings.Contains(s, "made:entry") {
			if onceB.CompareAndSwap(false, true) {
				close(reachedB)
			}
			return false
		}
		return true
	})
	enter := func(mm matchmakingv1.MatchmakingServiceClient) <-chan error {
		out := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(g.ctx(), 30*time.Second)
			defer cancel()
			r, err := mm.EnterQueue(ctx, &matchmakingv1.EnterQueueRequest{RequestId: req, Kind: janggi})
			if err == nil {
				t.Logf("entered %s", r.GetTicket().GetTicketId())
			}
			out <- err
		}()
		return out
	}
	wait := func(c <-chan struct{}, what string) {
		select {
		case <-c:
		case <-time.After(15 * time.Second):
			t.Fatalf("%s never reached", what)
		}
	}
	errA := enter(mmA)
	wait(reachedA, "A's check of its claim")
	errB := enter(mmB)
	wait(reachedB, "B's ticket write")
	freeA.Store(true)
	err := <-errA
	t.Logf("first call: %v", err)
	freeB.Store(true)
	if err := <-errB; err != nil {
		t.Fatalf("retry: %v", err)
	}
	pA.Restore()
	pB.Restore()
	// One ticket was made: the bound of one entry an hour is used up.
	mm := e.mm[0]
	lt, err := mm.EnterQueue(g.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: req, Kind: janggi})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mm.CancelTicket(g.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: lt.GetTicket().GetTicketId()}); err != nil {
		t.Fatal(err)
	}
	_, err = mm.EnterQueue(g.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: "review-other", Kind: janggi})
	if err == nil {
		t.Errorf("a second new ticket in the hour admitted under --max-queue-entries-per-hour 1: the first call, refused (%v), took back the admission of the ticket its retry made", "ErrRacedEntries")
	}
}
