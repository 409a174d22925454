package matchmaking_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/apierr"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/newest"
	"github.com/palacehq/palace/services/matchmaking"
	"github.com/palacehq/palace/services/matchmaking/internal/games"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

func (e *env) invite(p player) *matchmakingv1.Invite {
	e.t.Helper()
	r, err := e.mm[0].CreateInvite(p.ctx(), &matchmakingv1.CreateInviteRequest{RequestId: rid(), Kind: janggi})
	if err != nil {
		e.t.Fatalf("CreateInvite: %v", err)
	}
	return r.GetInvite()
}

// watchInvite collects an invite's states until its stream ends.
func watchInvite(t *testing.T, e *env, p player, token string) <-chan []*matchmakingv1.Invite {
	t.Helper()
	out := make(chan []*matchmakingv1.Invite, 1)
	ctx, cancel := context.WithTimeout(p.ctx(), 20*time.Second)
	st, err := e.mm[0].WatchInvite(ctx, &matchmakingv1.WatchInviteRequest{Token: token})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	first, err := st.Recv() // the stream is live once the first state arrived
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer cancel()
		all := []*matchmakingv1.Invite{first.GetInvite()}
		for {
			r, err := st.Recv()
			if err == io.EOF {
				out <- all
				return
			}
			if err != nil {
				t.Errorf("WatchInvite: %v", err)
				out <- all
				return
			}
			all = append(all, r.GetInvite())
		}
	}()
	return out
}

func TestInviteAccepted(t *testing.T) {
	e := newEnv(t, 1, nil)
	host, friend := e.guest("Host"), e.guest("Friend")
	inv := e.invite(host)
	if inv.GetState() != matchmakingv1.InviteState_INVITE_STATE_OPEN || len(inv.GetToken()) != 32 {
		t.Fatalf("invite %v", inv)
	}
	if d := time.Until(inv.GetExpiresAt().AsTime()); d < 23*time.Hour || d > 25*time.Hour {
		t.Fatalf("invite valid for %v, want 24 h", d)
	}
	// Whoever holds the link sees the invite without any credential.
	got, err := e.mm[0].GetInvite(context.Background(), &matchmakingv1.GetInviteRequest{Token: inv.GetToken()})
	if err != nil || got.GetInvite().GetCreatorName() != "Host" {
		t.Fatalf("GetInvite: %v %v", got, err)
	}
	states := watchInvite(t, e, host, inv.GetToken())

	r, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
	if err != nil {
		t.Fatalf("AcceptInvite: %v", err)
	}
	fs := r.GetInvite().GetSeat()
	if r.GetInvite().GetState() != matchmakingv1.InviteState_INVITE_STATE_ACCEPTED || fs.GetGameId() == "" || fs.GetOpponentId() != host.id {
		t.Fatalf("accepted invite %v", r.GetInvite())
	}
	all := <-states
	last := all[len(all)-1]
	hs := last.GetSeat()
	if last.GetState() != matchmakingv1.InviteState_INVITE_STATE_ACCEPTED || hs.GetGameId() != fs.GetGameId() || hs.GetSide() == fs.GetSide() {
		t.Fatalf("creator saw %v, friend has %v", last, fs)
	}
	g := e.gameAs(t, hs)
	if g.GetPublic() || g.GetRated() || g.GetTimeControl().GetByoYomi() == nil {
		t.Fatalf("friend game %v: want private, casual, clocked", g)
	}
	// Private: nobody without a seat may read it.
	_, err = e.game.Client.GetGame(context.Background(), &gamev1.GetGameRequest{GameId: hs.GetGameId()})
	wantCode(t, err, codes.PermissionDenied)

	// The friend retrying gets the same game.
	again, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
	if err != nil || again.GetInvite().GetSeat().GetGameId() != fs.GetGameId() {
		t.Fatalf("retry: %v %v", again, err)
	}
}

func TestInviteReused(t *testing.T) {
	e := newEnv(t, 1, nil)
	host, friend, third := e.guest("Host"), e.guest("Friend"), e.guest("Third")
	inv := e.invite(host)
	if _, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()}); err != nil {
		t.Fatal(err)
	}
	_, err := e.mm[0].AcceptInvite(third.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = e.mm[0].CancelInvite(host.ctx(), &matchmakingv1.CancelInviteRequest{Token: inv.GetToken()})
	wantCode(t, err, codes.FailedPrecondition)
}

func TestInviteExpired(t *testing.T) {
	e := newEnv(t, 1, nil)
	host, friend := e.guest("Host"), e.guest("Friend")
	inv := e.invite(host)
	states := watchInvite(t, e, host, inv.GetToken())
	e.clock.Advance(24*time.Hour + time.Second)
	_, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
	wantCode(t, err, codes.NotFound)
	_, err = e.mm[0].GetInvite(context.Background(), &matchmakingv1.GetInviteRequest{Token: inv.GetToken()})
	wantCode(t, err, codes.NotFound)
	// The creator's watch reports the expiry within its re-read interval.
	all := <-states
	if last := all[len(all)-1]; last.GetState() != matchmakingv1.InviteState_INVITE_STATE_EXPIRED {
		t.Fatalf("creator saw %v, want expired", all)
	}
}

func TestInviteRules(t *testing.T) {
	e := newEnv(t, 1, nil)
	host, friend := e.guest("Host"), e.guest("Friend")
	inv := e.invite(host)

	_, err := e.mm[0].AcceptInvite(host.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
	wantCode(t, err, codes.InvalidArgument) // one's own invite
	_, err = e.mm[0].CancelInvite(friend.ctx(), &matchmakingv1.CancelInviteRequest{Token: inv.GetToken()})
	wantCode(t, err, codes.PermissionDenied)
	_, err = e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: "0123456789abcdef0123456789abcdef"})
	wantCode(t, err, codes.NotFound)
	_, err = e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: "{bad}"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = e.mm[0].AcceptInvite(context.Background(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
	wantCode(t, err, codes.Unauthenticated)

	// A retried CreateInvite is the same invite.
	req := &matchmakingv1.CreateInviteRequest{RequestId: rid(), Kind: xiangqi}
	i1, err := e.mm[0].CreateInvite(host.ctx(), req)
	if err != nil {
		t.Fatal(err)
	}
	i2, err := e.mm[0].CreateInvite(host.ctx(), req)
	if err != nil || i2.GetInvite().GetToken() != i1.GetInvite().GetToken() {
		t.Fatalf("retry: %v %v", i2, err)
	}

	r, err := e.mm[0].CancelInvite(host.ctx(), &matchmakingv1.CancelInviteRequest{Token: inv.GetToken()})
	if err != nil || r.GetInvite().GetState() != matchmakingv1.InviteState_INVITE_STATE_CANCELLED {
		t.Fatalf("cancel: %v %v", r, err)
	}
	_, err = e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
	wantCode(t, err, codes.FailedPrecondition)
}

// TestStalledInviteIsCompleted: a friend's call that claimed the invite
// died before its game was made (its replica was killed), and the friend
// never retried. The creator must not wait on an open invite nobody else
// may accept: once the claim has stalled, watching the invite completes
// it, with the game the friend's retry gets too.
func TestStalledInviteIsCompleted(t *testing.T) {
	e := newEnv(t, 1, nil)
	host, friend := e.guest("Host"), e.guest("Friend")
	inv := e.invite(host)
	st := store.New(e.game.Redis, e.cfg.KeyPrefix)
	if out, err := st.AcceptInvite(context.Background(), inv.GetToken(), friend.id, friend.name, e.clock.Now(), store.FriendFirst); err != nil || out != store.InviteGo {
		t.Fatalf("claim: %v %v", out, err)
	}
	// Within the stall time the claim is still the friend's own call's.
	got, err := e.mm[0].GetInvite(context.Background(), &matchmakingv1.GetInviteRequest{Token: inv.GetToken()})
	if err != nil || got.GetInvite().GetState() != matchmakingv1.InviteState_INVITE_STATE_OPEN {
		t.Fatalf("GetInvite of a fresh claim: %v %v, want open", got, err)
	}
	states := watchInvite(t, e, host, inv.GetToken())
	e.clock.Advance(11 * time.Second)
	all := <-states
	last := all[len(all)-1]
	hs := last.GetSeat()
	if last.GetState() != matchmakingv1.InviteState_INVITE_STATE_ACCEPTED || hs.GetGameId() == "" || hs.GetOpponentId() != friend.id {
		t.Fatalf("creator saw %v, want the stalled claim completed", all)
	}
	if hs.GetSide() != commonv1.Side_SIDE_SECOND {
		t.Fatalf("the creator's side is %v, want the one the claim drew (the friend first)", hs.GetSide())
	}
	again, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
	if err != nil || again.GetInvite().GetSeat().GetGameId() != hs.GetGameId() {
		t.Fatalf("the friend's retry: %v %v, want game %s", again, err, hs.GetGameId())
	}
	e.gameAs(t, again.GetInvite().GetSeat())
}

// TestWatchesAreBounded: a process serves at most --max-watches watch
// streams, one more is refused; a player holds at most
// --max-player-watches of them, a newer one ending its oldest and taking
// its place even on a full server; a request that fails its checks ends
// none.
func TestWatchesAreBounded(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) {
		c.MaxWatches, c.MaxPlayerWatches, c.WatchHeartbeat = 3, 2, 100*time.Millisecond
	})
	g, h := e.guest("Host"), e.guest("Other")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func(p player, token string) (matchmakingv1.MatchmakingService_WatchInviteClient, error) {
		st, err := e.mm[0].WatchInvite(metadata.NewOutgoingContext(ctx, metadata.Pairs("authorization", "Bearer "+p.token)), &matchmakingv1.WatchInviteRequest{Token: token})
		if err == nil {
			_, err = st.Recv()
		}
		return st, err
	}
	replaced := func(st matchmakingv1.MatchmakingService_WatchInviteClient, what string) {
		t.Helper()
		for {
			if _, err := st.Recv(); err != nil {
				wantCode(t, err, codes.ResourceExhausted)
				if !strings.Contains(err.Error(), "its oldest, this one, is closed") || apierr.ReasonOf(err) != newest.ReplacedReason {
					t.Errorf("%s is told %q, reason %q", what, err, apierr.ReasonOf(err))
				}
				return
			}
		}
	}
	mine, theirs := e.invite(g).GetToken(), e.invite(h).GetToken()
	var held []matchmakingv1.MatchmakingService_WatchInviteClient
	for range 3 {
		st, err := open(g, mine)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, st)
	}
	replaced(held[0], "the host's oldest watch")
	if _, err := open(h, theirs); err != nil {
		t.Fatalf("the third watch of the process: %v", err)
	}
	// The process holds three now (two of the host's, one of the other's).
	if _, err := open(h, theirs); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "too many watch streams") {
		t.Fatalf("a fourth watch of the process: %v, want ResourceExhausted", err)
	}
	// A watch the host may not open is refused as such, and ends none of
	// the host's: they go on sending.
	if _, err := open(g, theirs); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the host watching another's invite: %v, want PermissionDenied", err)
	}
	for range 3 {
		if _, err := held[1].Recv(); err != nil {
			t.Fatalf("a refused watch ended one of the host's: %v", err)
		}
	}
	// The host reconnects to the full server: its new watch takes the
	// place of its oldest.
	if _, err := open(g, mine); err != nil {
		t.Fatalf("the host's new watch on a full server: %v", err)
	}
	replaced(held[1], "the host's oldest watch on a full server")
}

// TestNoPlayerCanForetellAnInvitesSides: the sides of an invite's game
// were a hash of its token, which its creator holds from CreateInvite and
// its friend reads in the link: a creator could send only a link that
// seated them first, a friend accept only such a link. They are drawn
// when the friend claims the invite, and kept for its retries.
func TestNoPlayerCanForetellAnInvitesSides(t *testing.T) {
	e := newEnv(t, 1, nil)
	host := e.guest("Host")
	const n = 16
	foretold := 0
	for i := range n {
		inv := e.invite(host)
		creatorFirst := games.FirstIsA("invite", inv.GetToken())
		friend := e.guest(fmt.Sprintf("Friend%d", i))
		r, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
		if err != nil {
			t.Fatal(err)
		}
		friendFirst := r.GetInvite().GetSeat().GetSide() == commonv1.Side_SIDE_FIRST
		if creatorFirst != friendFirst {
			foretold++
		}
		again, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
		if err != nil || again.GetInvite().GetSeat().GetSide() != r.GetInvite().GetSeat().GetSide() {
			t.Fatalf("a retried accept: %v %v, want the side %v again", again, err, r.GetInvite().GetSeat().GetSide())
		}
	}
	// By chance once in 65,536 runs.
	if foretold == n {
		t.Fatalf("the sides of all %d invites were foretold from their tokens before they were accepted", n)
	}
}

// TestAnInviteClaimedWithoutADrawGetsTheTokensSides: an invite claimed by
// an earlier release, which stored no draw, is completed (by a watcher,
// or the friend's retry) with the sides that release would have given it.
func TestAnInviteClaimedWithoutADrawGetsTheTokensSides(t *testing.T) {
	e := newEnv(t, 1, nil)
	host, friend := e.guest("Host"), e.guest("Friend")
	inv := e.invite(host)
	st := store.New(e.game.Redis, e.cfg.KeyPrefix)
	ctx := context.Background()
	if out, err := st.AcceptInvite(ctx, inv.GetToken(), friend.id, friend.name, e.clock.Now(), store.CreatorFirst); err != nil || out != store.InviteGo {
		t.Fatalf("claim: %v %v", out, err)
	}
	if n, err := e.game.Redis.HDel(ctx, e.cfg.KeyPrefix+"mm:{i:"+inv.GetToken()+"}", "cfirst").Result(); err != nil || n != 1 {
		t.Fatalf("forget the draw: %v %v", n, err)
	}
	r, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
	if err != nil {
		t.Fatal(err)
	}
	want := commonv1.Side_SIDE_SECOND
	if !games.FirstIsA("invite", inv.GetToken()) {
		want = commonv1.Side_SIDE_FIRST
	}
	if got := r.GetInvite().GetSeat().GetSide(); got != want {
		t.Fatalf("the friend's side is %v, want %v as the token gives it", got, want)
	}
}
