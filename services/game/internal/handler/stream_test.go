package handler

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
)

// serverStream is the server's end of an event stream whose client reads
// everything at once; its context ends when the handler returns, as
// gRPC's does.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s serverStream) Context() context.Context                { return s.ctx }
func (s serverStream) Send(*gamev1.StreamEventsResponse) error { return nil }
func (s serverStream) SendMsg(any) error                       { return nil }
func (s serverStream) SetHeader(metadata.MD) error             { return nil }
func (s serverStream) SendHeader(metadata.MD) error            { return nil }
func (s serverStream) SetTrailer(metadata.MD)                  {}

// TestAStreamCompletesAtItsGamesEndWhileItsPresenceIsRecorded: a seat's
// stream records its player connected beside the stream, a few Redis calls
// and the game's lock, which a busy machine may take seconds over. Once
// the stream has sent its game's end, that record no longer matters, and
// the client must not wait for it: the stream completes at once, and the
// seat is forgotten and unlisted once the record is done.
func TestAStreamCompletesAtItsGamesEndWhileItsPresenceIsRecorded(t *testing.T) {
	h, hooked := hookedHandler(t, 10*time.Millisecond)
	id, red, _ := newXiangqi(t, h)
	f := newListingFaults(id)
	f.saddPasses = true
	f.saddArmed.Store(true)
	close(f.sremRelease)
	hooked.AddHook(f)

	ctx, cancel := context.WithCancel(red)
	done := make(chan error, 1)
	go func() {
		err := h.StreamEvents(&gamev1.StreamEventsRequest{GameId: id, Snapshot: true}, serverStream{ctx: ctx})
		cancel()
		done <- err
	}()
	select {
	case <-f.saddReached:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream never recorded its seat connected")
	}
	// The player's connected record is on its way, slow; Red resigns.
	if _, err := h.Resign(red, &gamev1.ResignRequest{GameId: id, RequestId: "resign"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the stream ended with %v, not complete", err)
		}
	case <-time.After(5 * time.Second):
		close(f.saddRelease)
		<-done
		t.Fatal("the stream had sent its game's end, yet stayed open 5 s for its player's connected record")
	}
	close(f.saddRelease)
	k := seatKey{id, rules.First}
	deadline := time.Now().Add(10 * time.Second)
	for h.presence.holds(k) || isListed(t, h, id) {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the record went through, presence holds the seat: %v, it is listed: %v", h.presence.holds(k), isListed(t, h, id))
		}
		h.retryPresence(t.Context())
		time.Sleep(20 * time.Millisecond)
	}
	if holdsFirst(t, h, id) {
		t.Error("the ended game has the seat held by this process")
	}
}
