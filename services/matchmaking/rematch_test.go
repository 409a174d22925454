package matchmaking_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/auth"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// friendGame plays host against friend through an invite and returns both
// seats.
func (e *env) friendGame(host, friend player) (hostSeat, friendSeat *matchmakingv1.Seat) {
	e.t.Helper()
	inv := e.invite(host)
	r, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := e.mm[0].WatchInvite(host.ctx(), &matchmakingv1.WatchInviteRequest{Token: inv.GetToken()})
	if err != nil {
		e.t.Fatal(err)
	}
	hr, err := w.Recv()
	if err != nil {
		e.t.Fatal(err)
	}
	return hr.GetInvite().GetSeat(), r.GetInvite().GetSeat()
}

// TestARematchNeedsNoSeatCredentialOfTheGame: matchmaking asks the game
// service whether a game is over with its own service credential; the
// seat credentials it recorded at creation may have run out, or their key
// been removed, while the game is still kept.
func TestARematchNeedsNoSeatCredentialOfTheGame(t *testing.T) {
	e := newEnv(t, 1, nil)
	a, b := e.guest("A"), e.guest("B")
	sa, sb := e.friendGame(a, b)
	e.resign(t, sb)
	rdb := redistest.Client(t)
	key := e.cfg.KeyPrefix + "mm:{gm:" + sa.GetGameId() + "}"
	if n, err := rdb.HExists(context.Background(), key, "t1").Result(); err != nil || !n {
		t.Fatalf("no seat credential recorded at %s: %v", key, err)
	}
	if err := rdb.HSet(context.Background(), key, "t1", "k.no-longer-good", "t2", "k.no-longer-good").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: sa.GetGameId()}); err != nil {
		t.Fatalf("a rematch offer on a game whose recorded credentials are no longer good: %v", err)
	}
}

func TestRematchSwapsSides(t *testing.T) {
	e := newEnv(t, 1, nil)
	a, b := e.guest("A"), e.guest("B")
	sa, sb := e.friendGame(a, b)
	game := sa.GetGameId()

	_, err := e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: game})
	wantCode(t, err, codes.FailedPrecondition) // still running
	e.resign(t, sb)

	stranger := e.guest("C")
	_, err = e.mm[0].OfferRematch(stranger.ctx(), &matchmakingv1.OfferRematchRequest{GameId: game})
	wantCode(t, err, codes.PermissionDenied)
	_, err = e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: "nosuchgame"})
	wantCode(t, err, codes.NotFound)
	// A game against the AI is no game between players, and says so.
	ai, err := e.mm[0].PlayAi(a.ctx(), &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: janggi, Level: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: ai.GetSeat().GetGameId()})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "was against the AI: rematches are for games between two players; start another with PlayAi") {
		t.Fatalf("a rematch of a game against the AI: %v", err)
	}
	_, err = e.mm[0].OfferRematch(b.ctx(), &matchmakingv1.OfferRematchRequest{GameId: ai.GetSeat().GetGameId()})
	wantCode(t, err, codes.NotFound)
	_, err = e.mm[0].AcceptRematch(b.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: game})
	wantCode(t, err, codes.FailedPrecondition) // nothing offered

	off, err := e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: game})
	if err != nil || off.GetRematch().GetState() != matchmakingv1.RematchState_REMATCH_STATE_OFFERED || off.GetRematch().GetOfferedBy() != a.id {
		t.Fatalf("offer: %v %v", off, err)
	}
	if d := time.Until(off.GetRematch().GetExpiresAt().AsTime()); d < 55*time.Second || d > 65*time.Second {
		t.Fatalf("offer stands %v, want 60 s", d)
	}
	// The offerer cannot accept their own offer.
	_, err = e.mm[0].AcceptRematch(a.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: game})
	wantCode(t, err, codes.FailedPrecondition)

	watched := make(chan *matchmakingv1.Rematch, 1)
	ws, err := e.mm[0].WatchRematch(a.ctx(), &matchmakingv1.WatchRematchRequest{GameId: game})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		var last *matchmakingv1.Rematch
		for {
			r, err := ws.Recv()
			if err != nil {
				if err != io.EOF {
					t.Errorf("WatchRematch: %v", err)
				}
				watched <- last
				return
			}
			last = r.GetRematch()
		}
	}()

	acc, err := e.mm[0].AcceptRematch(b.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: game})
	if err != nil {
		t.Fatal(err)
	}
	nb := acc.GetRematch().GetSeat()
	if acc.GetRematch().GetState() != matchmakingv1.RematchState_REMATCH_STATE_ACCEPTED || nb.GetGameId() == "" || nb.GetGameId() == game {
		t.Fatalf("accepted %v", acc)
	}
	if nb.GetSide() != sa.GetSide() {
		t.Fatalf("B had %v, now %v: sides must swap", sb.GetSide(), nb.GetSide())
	}
	var na *matchmakingv1.Seat
	select {
	case r := <-watched:
		na = r.GetSeat()
	case <-time.After(10 * time.Second):
		t.Fatal("the offerer's watch did not report the acceptance")
	}
	if na.GetGameId() != nb.GetGameId() || na.GetSide() != sb.GetSide() {
		t.Fatalf("A's new seat %v, B's %v", na, nb)
	}
	// A retry returns the same game.
	again, err := e.mm[0].AcceptRematch(b.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: game})
	if err != nil || again.GetRematch().GetSeat().GetGameId() != nb.GetGameId() {
		t.Fatalf("retry: %v %v", again, err)
	}

	// The rematch of the rematch swaps again: both offering is agreement.
	e.resign(t, na)
	if _, err := e.mm[0].OfferRematch(b.ctx(), &matchmakingv1.OfferRematchRequest{GameId: nb.GetGameId()}); err != nil {
		t.Fatal(err)
	}
	third, err := e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: nb.GetGameId()})
	if err != nil || third.GetRematch().GetState() != matchmakingv1.RematchState_REMATCH_STATE_ACCEPTED {
		t.Fatalf("mutual offer: %v %v", third, err)
	}
	if third.GetRematch().GetSeat().GetSide() != sa.GetSide() {
		t.Fatalf("third game: A is %v, want %v again", third.GetRematch().GetSeat().GetSide(), sa.GetSide())
	}
}

func TestRematchOfferExpires(t *testing.T) {
	e := newEnv(t, 1, nil)
	a, b := e.guest("A"), e.guest("B")
	sa, _ := e.friendGame(a, b)
	e.resign(t, sa)
	off, err := e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: sa.GetGameId()})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(61 * time.Second)
	_, err = e.mm[0].AcceptRematch(b.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: sa.GetGameId()})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = e.mm[0].DeclineRematch(b.ctx(), &matchmakingv1.DeclineRematchRequest{GameId: sa.GetGameId(), OfferId: off.GetRematch().GetOfferId()})
	wantCode(t, err, codes.FailedPrecondition)
	// A new offer after the window opens a new one.
	r, err := e.mm[0].OfferRematch(b.ctx(), &matchmakingv1.OfferRematchRequest{GameId: sa.GetGameId()})
	if err != nil || r.GetRematch().GetOfferedBy() != b.id || r.GetRematch().GetDeclinedBy() != "" {
		t.Fatalf("new offer: %v %v", r, err)
	}
}

// TestRematchWatchSeesAReplacedOffer: an offer expires and the other
// player offers before the watcher looks again. The state reads "offered"
// both times, but the offer is another: the watcher must be told.
func TestRematchWatchSeesAReplacedOffer(t *testing.T) {
	e := newEnv(t, 1, nil)
	a, b := e.guest("A"), e.guest("B")
	sa, _ := e.friendGame(a, b)
	e.resign(t, sa)
	if _, err := e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: sa.GetGameId()}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(a.ctx(), 5*time.Second)
	defer cancel()
	ws, err := e.mm[0].WatchRematch(ctx, &matchmakingv1.WatchRematchRequest{GameId: sa.GetGameId()})
	if err != nil {
		t.Fatal(err)
	}
	first, err := ws.Recv()
	if err != nil || first.GetRematch().GetOfferedBy() != a.id {
		t.Fatalf("first state %v %v, want A's offer", first, err)
	}
	// A's offer was announced before the watch began, but the
	// announcement may reach this process after it: one that woke the
	// watcher after the clock's jump would show it A's offer over, and the
	// watch would end before B offers. Let it arrive first.
	time.Sleep(300 * time.Millisecond)
	// The watcher wakes in real time at the offer's expiry, 60 s away;
	// on the service's clock the offer is already over when B offers.
	e.clock.Advance(61 * time.Second)
	if _, err := e.mm[0].OfferRematch(b.ctx(), &matchmakingv1.OfferRematchRequest{GameId: sa.GetGameId()}); err != nil {
		t.Fatal(err)
	}
	next, err := ws.Recv()
	if err != nil {
		t.Fatalf("the watcher was not told of B's offer: %v", err)
	}
	if r := next.GetRematch(); r.GetState() != matchmakingv1.RematchState_REMATCH_STATE_OFFERED || r.GetOfferedBy() != b.id {
		t.Fatalf("next state %v, want B's offer", r)
	}
}

// TestStalledRematchIsCompleted: the opponent's AcceptRematch claimed the
// offer, then died before the new game was made (its replica was killed,
// or the game service was away), and the opponent never retried. The
// offerer watching must not be shown an offer that never ends: once the
// claim has stalled, the watch completes it, with the game the
// opponent's retry gets too.
func TestStalledRematchIsCompleted(t *testing.T) {
	e := newEnv(t, 1, nil)
	a, b := e.guest("A"), e.guest("B")
	sa, _ := e.friendGame(a, b)
	e.resign(t, sa)
	game := sa.GetGameId()
	if _, err := e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: game}); err != nil {
		t.Fatal(err)
	}
	st := store.New(e.game.Redis, e.cfg.KeyPrefix)
	if out, err := st.AcceptRematch(context.Background(), game, b.id, e.clock.Now(), time.Hour); err != nil || !out.Go {
		t.Fatalf("claim: %+v %v", out, err)
	}
	ctx, cancel := context.WithTimeout(a.ctx(), 20*time.Second)
	defer cancel()
	ws, err := e.mm[0].WatchRematch(ctx, &matchmakingv1.WatchRematchRequest{GameId: game})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Recv(); err != nil {
		t.Fatal(err)
	}
	// Past the offer's window and the stall time.
	e.clock.Advance(61 * time.Second)
	var last *matchmakingv1.Rematch
	for {
		r, err := ws.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("WatchRematch: %v (last %v)", err, last)
		}
		last = r.GetRematch()
	}
	seat := last.GetSeat()
	if last.GetState() != matchmakingv1.RematchState_REMATCH_STATE_ACCEPTED || seat.GetGameId() == "" || seat.GetSide() == sa.GetSide() {
		t.Fatalf("the offerer saw %v, want the stalled claim completed, sides swapped", last)
	}
	again, err := e.mm[0].AcceptRematch(b.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: game})
	if err != nil || again.GetRematch().GetSeat().GetGameId() != seat.GetGameId() {
		t.Fatalf("the opponent's retry: %v %v, want game %s", again, err, seat.GetGameId())
	}
	e.gameAs(t, seat)
}

// gameServiceBeforeGetGames serves the game service at addr as a release
// before GetGames did: every call but GetGames is passed on, with the
// caller's credentials; GetGames is unknown.
type gameServiceBeforeGetGames struct {
	gamev1.UnimplementedGameServiceServer
	next gamev1.GameServiceClient
}

func (s gameServiceBeforeGetGames) pass(ctx context.Context) context.Context {
	in, _ := metadata.FromIncomingContext(ctx)
	out := metadata.MD{}
	for _, k := range []string{"authorization", auth.ServiceHeader} {
		if v := in.Get(k); len(v) > 0 {
			out.Set(k, v...)
		}
	}
	return metadata.NewOutgoingContext(ctx, out)
}

func (s gameServiceBeforeGetGames) CreateGame(ctx context.Context, req *gamev1.CreateGameRequest) (*gamev1.CreateGameResponse, error) {
	return s.next.CreateGame(s.pass(ctx), req)
}

func (s gameServiceBeforeGetGames) GetGame(ctx context.Context, req *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
	return s.next.GetGame(s.pass(ctx), req)
}

func startGameServiceBeforeGetGames(t *testing.T, addr string) string {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	gamev1.RegisterGameServiceServer(srv, gameServiceBeforeGetGames{next: gamev1.NewGameServiceClient(cc)})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// TestARematchWithAGameServiceBeforeGetGames: during a rolling update
// that brings matchmaking up before the game service (or rolls the game
// service back), the game service may be of a release without GetGames.
// Whether a game is over is then read as those releases were asked, with
// a seat credential of the game, and a rematch is offered and accepted.
func TestARematchWithAGameServiceBeforeGetGames(t *testing.T) {
	e := newEnv(t, 0, nil)
	e.cfg.GameAddr = startGameServiceBeforeGetGames(t, e.game.Addr)
	e.startReplica()
	a, b := e.guest("A"), e.guest("B")
	sa, sb := e.friendGame(a, b)
	game := sa.GetGameId()
	_, err := e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: game})
	wantCode(t, err, codes.FailedPrecondition) // still running
	e.resign(t, sb)
	if _, err := e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: game}); err != nil {
		t.Fatalf("a rematch offer through a game service without GetGames: %v", err)
	}
	r, err := e.mm[0].AcceptRematch(b.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: game})
	if err != nil || r.GetRematch().GetSeat().GetGameId() == "" {
		t.Fatalf("the rematch accepted through a game service without GetGames: %v %v", r.GetRematch(), err)
	}
}
