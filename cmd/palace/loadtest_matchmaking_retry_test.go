package main

import (
	"context"
	"io"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
)

// cutQueue is a matchmaking service whose first EnterQueue is answered
// Unavailable although its ticket entered, as when the connection closes
// at the end of its age's grace while Redis is slow: the server completes
// the call, the client never hears of it. A retry with the same request id
// is answered with that ticket, and its watch reports it matched.
type cutQueue struct {
	matchmakingv1.MatchmakingServiceClient
	mu  sync.Mutex
	ids []string
}

func (q *cutQueue) EnterQueue(_ context.Context, r *matchmakingv1.EnterQueueRequest, _ ...grpc.CallOption) (*matchmakingv1.EnterQueueResponse, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ids = append(q.ids, r.GetRequestId())
	if len(q.ids) == 1 {
		return nil, status.Error(codes.Unavailable, "closing transport: received prior goaway")
	}
	return &matchmakingv1.EnterQueueResponse{Ticket: &matchmakingv1.Ticket{TicketId: "t1", State: matchmakingv1.TicketState_TICKET_STATE_WAITING}}, nil
}

func (q *cutQueue) WatchTicket(context.Context, *matchmakingv1.WatchTicketRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[matchmakingv1.WatchTicketResponse], error) {
	return &matchedWatch{}, nil
}

// matchedWatch reports its ticket matched, then ends.
type matchedWatch struct {
	grpc.ClientStream
	sent bool
}

func (w *matchedWatch) Recv() (*matchmakingv1.WatchTicketResponse, error) {
	if w.sent {
		return nil, io.EOF
	}
	w.sent = true
	return &matchmakingv1.WatchTicketResponse{Ticket: &matchmakingv1.Ticket{TicketId: "t1", State: matchmakingv1.TicketState_TICKET_STATE_MATCHED,
		Seat: &matchmakingv1.Seat{GameId: "g1"}}}, nil
}

// TestLoadtestMatchmakingRetriesAnEntryCutOff sends an EnterQueue that got
// Unavailable again with the same request id, as an app would: the entry
// may have been applied, and a player who gave up on it would leave a
// ticket in the queue that pairs with another player's, which the report
// would then count as a wrong pairing.
func TestLoadtestMatchmakingRetriesAnEntryCutOff(t *testing.T) {
	q := &cutQueue{}
	l := &mmLoad{mm: []matchmakingv1.MatchmakingServiceClient{q}, pools: []mmPool{{name: "xiangqi/casual"}}}
	tk := &mmTicket{idx: 0, player: "p0", token: "tok"}
	l.play(t.Context(), tk)
	if l.errs.Load() != 0 || tk.seat.GetGameId() != "g1" {
		t.Fatalf("errors %d, seat %v; want no error and the seat of g1\n%v", l.errs.Load(), tk.seat, l.errSample)
	}
	if len(q.ids) != 2 || q.ids[0] != q.ids[1] {
		t.Errorf("EnterQueue request ids %q; want the same one twice", q.ids)
	}
}
