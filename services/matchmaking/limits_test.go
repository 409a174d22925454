package matchmaking_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/apierr"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
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
	e := newEnv(t, 1, func(c *matchmaking.Config) { c.MaxAIGames, c.MaxInvites = 2, 2 })
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
	for _, r := range []string{"inv-1", "inv-2"} {
		if err := invite(r); err != nil {
			t.Fatalf("invites count apart from AI games: %v", err)
		}
	}
	if err := invite("inv-3"); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "you made the most allowed, 2 invites,") {
		t.Fatalf("a third invite: %v", err)
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
	c.MaxAIGames, c.MaxInvites = 0, 0
	if err := c.Validate(); err != nil {
		t.Fatalf("no bounds: %v", err)
	}
}
