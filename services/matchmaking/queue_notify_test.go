package matchmaking_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/services/matchmaking"
)

// TestAWatchIsToldOfThePairing: WatchTicket sends the ticket "after every
// change", PAIRED among them. While the game service is away (nothing
// listens at its address) a paired ticket stays paired up to
// --give-up-after; its watcher used to hear of it only at the next 5 s
// poll, told WAITING while CancelTicket already answered "already has an
// opponent". The pass tells the watchers of the tickets it pairs.
func TestAWatchIsToldOfThePairing(t *testing.T) {
	e := newEnv(t, 1, func(c *matchmaking.Config) {
		c.GameAddr = "127.0.0.1:1" // the game service is away
		c.GiveUpAfter = 20 * time.Second
	})
	a, b := e.guest("Alice"), e.guest("Bob")
	ta := e.enter(e.mm[0], a, &matchmakingv1.EnterQueueRequest{})

	ctx, cancel := context.WithTimeout(a.ctx(), 10*time.Second)
	defer cancel()
	st, err := e.mm[0].WatchTicket(ctx, &matchmakingv1.WatchTicketRequest{TicketId: ta.GetTicketId()})
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Recv()
	if err != nil || first.GetTicket().GetState() != waiting {
		t.Fatalf("first message %v, %v: want waiting", first, err)
	}
	states := make(chan matchmakingv1.TicketState, 8)
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				close(states)
				return
			}
			states <- r.GetTicket().GetState()
		}
	}()

	e.enter(e.mm[0], b, &matchmakingv1.EnterQueueRequest{})
	// The pass (every 20 ms here) pairs them: a fresh read says PAIRED.
	eventually(t, 3*time.Second, "the tickets to be paired", func() bool {
		return ticketNow(t, e, a, ta.GetTicketId()) == matchmakingv1.TicketState_TICKET_STATE_PAIRED
	})
	if _, err := e.mm[0].CancelTicket(a.ctx(), &matchmakingv1.CancelTicketRequest{TicketId: ta.GetTicketId()}); codeOf(err) != codes.FailedPrecondition {
		t.Fatalf("cancel of the paired ticket: %v, want FailedPrecondition", err)
	}
	pairedAt := time.Now()
	select {
	case s, ok := <-states:
		if !ok || s != matchmakingv1.TicketState_TICKET_STATE_PAIRED {
			t.Fatalf("watch sent %v (open %v) after the pairing, want PAIRED", s, ok)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("the ticket has been paired for %v (CancelTicket: FailedPrecondition, already has an opponent), and its watch still said nothing since WAITING", time.Since(pairedAt).Round(time.Millisecond))
	}
}

// TestASecondDeviceLearnsWhichTicketWaits: the same account enters the
// queue from a second phone while its first waits. AlreadyExists says
// "watch it, or cancel it", and no call lists a player's tickets: the
// answer named the ticket only in its message, for people; its ErrorInfo
// (TICKET_EXISTS) names it in metadata ticket_id.
func TestASecondDeviceLearnsWhichTicketWaits(t *testing.T) {
	e := newEnv(t, 1, nil)
	phone := e.account("4001", "Two Phones")
	tablet := e.account("4001", "Two Phones")
	if phone.id != tablet.id {
		t.Fatalf("two sign-ins of one account are players %s and %s", phone.id, tablet.id)
	}
	tk := e.enter(e.mm[0], phone, &matchmakingv1.EnterQueueRequest{Kind: xiangqi})
	_, err := e.mm[0].EnterQueue(tablet.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: xiangqi})
	wantCode(t, err, codes.AlreadyExists)
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "TICKET_EXISTS" && info.GetMetadata()["ticket_id"] == tk.GetTicketId() {
			return
		}
	}
	t.Fatalf("AlreadyExists carries ticket %s only in its message: %q (details %v)", tk.GetTicketId(), st.Message(), st.Details())
}
