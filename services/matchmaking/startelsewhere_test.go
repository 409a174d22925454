package matchmaking_test

import (
	"context"
	"testing"
	"time"

	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
)

// wantWithdrawn fails unless each of tickets (by player) ended cancelled.
func wantWithdrawn(t *testing.T, e *env, tickets map[*player]*matchmakingv1.Ticket) {
	t.Helper()
	for p, tk := range tickets {
		if last := waitTicket(t, e.mm[0], *p, tk.GetTicketId(), 5*time.Second); last.GetState() != matchmakingv1.TicketState_TICKET_STATE_CANCELLED {
			t.Errorf("%s's ticket, entered before their game started elsewhere: %v, want withdrawn (cancelled)", p.name, last)
		}
	}
}

// Accepting a friend's invite while waiting in the queue once left the
// ticket waiting, to be paired with the next stranger: two games at once,
// with both clocks running. The invite's game now withdraws both
// players' waiting tickets; one entered after it began waits on, a retry of
// the accept leaving it alone.
func TestAcceptingAnInviteWithdrawsBothPlayersWaitingTickets(t *testing.T) {
	e := newEnv(t, 1, nil)
	host, friend, stranger := e.guest("Host"), e.guest("Friend"), e.guest("Stranger")
	inv := e.invite(host)
	hostTicket := e.enter(e.mm[0], host, &matchmakingv1.EnterQueueRequest{Kind: xiangqi})
	friendTicket := e.enter(e.mm[0], friend, &matchmakingv1.EnterQueueRequest{Kind: janggi})
	r, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
	if err != nil {
		t.Fatal(err)
	}
	wantWithdrawn(t, e, map[*player]*matchmakingv1.Ticket{&host: hostTicket, &friend: friendTicket})

	again := e.enter(e.mm[0], friend, &matchmakingv1.EnterQueueRequest{Kind: janggi})
	retry, err := e.mm[0].AcceptInvite(friend.ctx(), &matchmakingv1.AcceptInviteRequest{Token: inv.GetToken()})
	if err != nil || retry.GetInvite().GetSeat().GetGameId() != r.GetInvite().GetSeat().GetGameId() {
		t.Fatalf("retried accept: %v, %v; want game %s", retry, err, r.GetInvite().GetSeat().GetGameId())
	}
	e.enter(e.mm[0], stranger, &matchmakingv1.EnterQueueRequest{Kind: janggi})
	if last := waitTicket(t, e.mm[0], friend, again.GetTicketId(), 10*time.Second); last.GetState() != matchmakingv1.TicketState_TICKET_STATE_MATCHED {
		t.Fatalf("the ticket entered after the invite's game began: %v, want matched with the stranger", last)
	}
}

// Likewise after a game: one player taps "new opponent" (enters the queue),
// the other too, and then they agree to a rematch. The rematch withdraws
// both tickets.
func TestAcceptingARematchWithdrawsBothPlayersWaitingTickets(t *testing.T) {
	e := newEnv(t, 1, nil)
	a, b, stranger := e.guest("A"), e.guest("B"), e.guest("Stranger")
	sa, sb := e.friendGame(a, b)
	e.resign(t, sb)
	aTicket := e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{Kind: xiangqi})
	bTicket := e.enter(e.mm[0], b, &matchmakingv1.EnterQueueRequest{Kind: janggi})
	if _, err := e.mm[0].OfferRematch(a.ctx(), &matchmakingv1.OfferRematchRequest{GameId: sa.GetGameId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.mm[0].AcceptRematch(b.ctx(), &matchmakingv1.AcceptRematchRequest{GameId: sa.GetGameId()}); err != nil {
		t.Fatal(err)
	}
	wantWithdrawn(t, e, map[*player]*matchmakingv1.Ticket{&a: aTicket, &b: bTicket})
	strangers := e.enter(e.mm[0], stranger, &matchmakingv1.EnterQueueRequest{Kind: janggi})
	if _, err := e.mm[0].CancelTicket(stranger.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: strangers.GetTicketId()}); err != nil {
		t.Fatalf("the stranger's ticket could not be cancelled, so it was paired: %v", err)
	}
}

// A game against the AI withdraws the player's waiting ticket too.
func TestPlayingTheAIWithdrawsTheWaitingTicket(t *testing.T) {
	e := newEnv(t, 1, nil)
	p := e.guest("P")
	tk := e.enter(e.mm[0], p, &matchmakingv1.EnterQueueRequest{Kind: janggi})
	if _, err := e.mm[0].PlayAi(p.ctx(), &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 1}); err != nil {
		t.Fatal(err)
	}
	wantWithdrawn(t, e, map[*player]*matchmakingv1.Ticket{&p: tk})
}

// ticketNow reads a ticket's state as its first watch message gives it.
func ticketNow(t *testing.T, e *env, p player, id string) matchmakingv1.TicketState {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx(), 5*time.Second)
	defer cancel()
	st, err := e.mm[0].WatchTicket(ctx, &matchmakingv1.WatchTicketRequest{TicketId: id})
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return r.GetTicket().GetState()
}

// A retry of PlayAi (its answer lost) finds the game the first call made:
// a ticket the player entered in between, after that game began, keeps
// waiting. It was once withdrawn, the retry's own time taken for the
// game's start.
func TestARetriedPlayAiLeavesATicketEnteredAfterItsGame(t *testing.T) {
	e := newEnv(t, 1, nil)
	wantTicketLeftByARetriedPlayAi(t, e, func(player, string) {})
}

// wantTicketLeftByARetriedPlayAi has a guest play the AI and then enter
// the queue, has lose undo what the first call wrote (its answer lost
// too), and fails unless a retry of the call finds the same game and
// leaves the ticket waiting.
func wantTicketLeftByARetriedPlayAi(t *testing.T, e *env, lose func(p player, game string)) {
	t.Helper()
	p := e.guest("P")
	req := &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 1}
	first, err := e.mm[0].PlayAi(p.ctx(), req)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	tk := e.enter(e.mm[0], p, &matchmakingv1.EnterQueueRequest{Kind: janggi})
	lose(p, first.GetSeat().GetGameId())
	again, err := e.mm[0].PlayAi(p.ctx(), req)
	if err != nil || again.GetSeat().GetGameId() != first.GetSeat().GetGameId() {
		t.Fatalf("retry: %v %v, want game %s", again, err, first.GetSeat().GetGameId())
	}
	if s := ticketNow(t, e, p, tk.GetTicketId()); s != matchmakingv1.TicketState_TICKET_STATE_WAITING {
		t.Fatalf("a ticket entered after the AI game began, then a retry of that PlayAi: %v, want still waiting", s)
	}
}

// loseMadeGame deletes the record of the one game p made against the AI,
// as a Redis failover losing the last write would.
func loseMadeGame(t *testing.T, e *env, p player) {
	t.Helper()
	keys := keysUnder(t, e.cfg.KeyPrefix+"mm:{pl:"+p.id+"}:game:ai:")
	if len(keys) != 1 {
		t.Fatalf("made-game records %v, want 1", keys)
	}
	if err := e.game.Redis.Del(context.Background(), keys[0]).Err(); err != nil {
		t.Fatal(err)
	}
}

// A PlayAi that fails (the game service down) makes no game and leaves
// the player's ticket waiting; it was once withdrawn first, leaving the
// player with neither.
func TestAPlayAiThatFailsLeavesTheTicketWaiting(t *testing.T) {
	e := newEnv(t, 1, nil)
	p := e.guest("P")
	tk := e.enter(e.mm[0], p, &matchmakingv1.EnterQueueRequest{Kind: janggi})
	e.game.Stop()
	ctx, cancel := context.WithTimeout(p.ctx(), 20*time.Second)
	defer cancel()
	if _, err := e.mm[0].PlayAi(ctx, &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 1}); err == nil {
		t.Fatal("PlayAi succeeded with the game service stopped")
	}
	if s := ticketNow(t, e, p, tk.GetTicketId()); s != matchmakingv1.TicketState_TICKET_STATE_WAITING {
		t.Fatalf("the ticket of a player whose PlayAi failed: %v, want still waiting", s)
	}
}

// TestPlayAiWithdrawsATicketEnteredJustBeforeByMatchmakingsClock: PlayAi
// withdrew the tickets entered before its game by comparing their entry
// (matchmaking's clock) with the game's created_at (the game service's,
// Redis' time): with matchmaking's host 3 s ahead, a ticket entered just
// before PlayAi was left waiting, and the queue could pair a player
// already playing the AI into a second game with its clock running.
func TestPlayAiWithdrawsATicketEnteredJustBeforeByMatchmakingsClock(t *testing.T) {
	e := newEnv(t, 1, nil)
	e.clock.Advance(3 * time.Second) // matchmaking's host 3 s ahead
	p := e.guest("P")
	tk := e.enter(e.mm[0], p, &matchmakingv1.EnterQueueRequest{Kind: janggi})
	time.Sleep(50 * time.Millisecond)
	if _, err := e.mm[0].PlayAi(p.ctx(), &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 1}); err != nil {
		t.Fatal(err)
	}
	if s := ticketNow(t, e, p, tk.GetTicketId()); s != matchmakingv1.TicketState_TICKET_STATE_CANCELLED {
		t.Fatalf("ticket entered 50 ms before PlayAi (matchmaking 3 s ahead of the game service): %v, want CANCELLED (withdrawn)", s)
	}
}

// TestARetriedPlayAiLeavesATicketEnteredAfterItsGameByMatchmakingsClock:
// the converse, matchmaking's host 3 s behind: a retry of PlayAi (its
// answer and its record lost) withdrew a ticket entered after the game
// began, the game's created_at reading later than the ticket's entry.
func TestARetriedPlayAiLeavesATicketEnteredAfterItsGameByMatchmakingsClock(t *testing.T) {
	e := newEnv(t, 1, nil)
	e.clock.Advance(-3 * time.Second) // matchmaking's host 3 s behind
	wantTicketLeftByARetriedPlayAi(t, e, func(p player, _ string) { loseMadeGame(t, e, p) })
}

// TestARetriedPlayAiWhoseListingWasLostLeavesATicketEnteredAfterItsGame:
// a Redis failover that loses the first call's last writes on the
// player's slot loses its listing of the game with its record; a retry
// then listed the game afresh and took its own time for the game's
// start, withdrawing a ticket the player entered after the game began.
// A game made longer ago than the clocks may differ is dated by the game
// service.
func TestARetriedPlayAiWhoseListingWasLostLeavesATicketEnteredAfterItsGame(t *testing.T) {
	e := newEnv(t, 1, nil)
	wantTicketLeftByARetriedPlayAi(t, e, func(p player, game string) {
		// The failover lost the first call's last writes: its record and
		// its listing of the game.
		loseMadeGame(t, e, p)
		prefix := e.cfg.KeyPrefix + "mm:{pl:" + p.id + "}:"
		ctx := context.Background()
		if err := e.game.Redis.ZRem(ctx, prefix+"g", game).Err(); err != nil {
			t.Fatal(err)
		}
		if err := e.game.Redis.HDel(ctx, prefix+"gi", game).Err(); err != nil {
			t.Fatal(err)
		}
		// The retry comes later than the clocks may differ.
		e.clock.Advance(10 * time.Second)
	})
}

// TestAnEntryOnItsWayBeforeItsClaimWasPairedBesideAnAIGame: a player's
// entry (device 1, replica B) has dated its ticket and is held before its
// claim of the player's live-ticket record (a slow read of its request);
// meanwhile PlayAi (device 2, replica A) makes a game and withdraws the
// player's tickets entered before it. It found none, and the entry's
// ticket, dated before the game, waited and was paired: the player was
// handed a queue game on top of the AI game.
func TestAnEntryOnItsWayBeforeItsClaimWasPairedBesideAnAIGame(t *testing.T) {
	e := newEnv(t, 1, nil)
	proxy, b := replicaThroughProxy(t, e)
	a := e.mm[0]
	p := e.guest("TwoDevices")
	req := &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: janggi}
	requestKey := []byte(":r:" + p.id + ":" + req.GetRequestId())

	entered, wait := enterHeld(t, proxy, b, p, req)
	wait(requestKey)
	// Device 2 starts a game against the AI through replica A.
	_, err := a.PlayAi(p.ctx(), &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: janggi, Level: 1})
	proxy.Restore()
	if err != nil {
		t.Fatal(err)
	}
	r := <-entered
	if r.err != nil {
		t.Fatalf("EnterQueue: %v", r.err)
	}
	// Someone else enters, to be paired with the ticket if it waits.
	e.enter(a, e.guest("Other"), &matchmakingv1.EnterQueueRequest{Kind: janggi})
	if got := ticketNow(t, e, p, r.tk.GetTicketId()); r.tk.GetState() != cancelled || got != cancelled {
		t.Fatalf("ticket %s, entered before the AI game began, was answered %v and is now %v: want it withdrawn", r.tk.GetTicketId(), r.tk.GetState(), got)
	}
}
