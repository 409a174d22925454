package handler

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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

// streamOf streams game id's events, with a snapshot, to the seat whose
// call context is as, and sends what the stream returns on the channel.
func streamOf(h *Handler, as context.Context, id string) <-chan error {
	ctx, cancel := context.WithCancel(as)
	done := make(chan error, 1)
	go func() {
		err := h.StreamEvents(&gamev1.StreamEventsRequest{GameId: id, Snapshot: true}, serverStream{ctx: ctx})
		cancel()
		done <- err
	}()
	return done
}

// streamRecordingSlowly is streamOf, once the stream's record of its seat
// connected is under way and held at its listing until f.saddRelease
// closes.
func streamRecordingSlowly(t *testing.T, h *Handler, hooked *redis.Client, as context.Context, id string) (f *listingFaults, done <-chan error) {
	t.Helper()
	f = newListingFaults(id)
	f.saddPasses = true
	f.saddArmed.Store(true)
	close(f.sremRelease)
	hooked.AddHook(f)
	done = streamOf(h, as, id)
	select {
	case <-f.saddReached:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream never recorded its seat connected")
	}
	return f, done
}

// TestAStreamCompletesAtItsGamesEndWhileItsPresenceIsRecorded: a seat's
// stream records its player connected beside the stream, a few Redis calls
// and the game's lock, which a busy machine may take seconds over. Once
// the stream has sent its game's end, that record no longer matters, and
// the client must not wait for it: the stream completes at once, and the
// seat is forgotten and unlisted once the record is done.
func TestAStreamCompletesAtItsGamesEndWhileItsPresenceIsRecorded(t *testing.T) {
	h, hooked := hookedHandler(t, 10*time.Millisecond)
	id, red, _ := newXiangqi(t, h)
	f, done := streamRecordingSlowly(t, h, hooked, red, id)
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

// TestAStreamEndingWhileCloseWaitsForgetsItsSeatItself: Close waits for
// the seat forgetting of streams that delivered their game's end, and a
// stream still running (the server's stop was cut off by its timeout:
// grpc-go's Stop does not wait for handlers) delivers its game's end
// meanwhile. It started its forgetting on the WaitGroup Close was waiting
// on, whose first Add must come before Wait: -race reported it, and the
// runtime may panic "WaitGroup is reused before previous Wait has
// returned", in Close, before the held-back closings are recorded.
func TestAStreamEndingWhileCloseWaitsForgetsItsSeatItself(t *testing.T) {
	h, hooked := hookedHandler(t, time.Minute)
	g1, red1, _ := newXiangqi(t, h)
	g2, red2, _ := newXiangqiFor(t, h, "create2")
	f, a := streamRecordingSlowly(t, h, hooked, red1, g1)
	b := streamOf(h, red2, g2)
	deadline := time.Now().Add(10 * time.Second)
	for !holdsFirst(t, h, g2) {
		if time.Now().After(deadline) {
			t.Fatal("stream B never recorded its seat")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A held-back closing, so that Close's flush waits a while.
	h.presence.opened(context.WithoutCancel(red2), g2, rules.Second)
	h.presence.closed(context.WithoutCancel(red2), g2, rules.Second)

	if _, err := h.Resign(red1, &gamev1.ResignRequest{GameId: g1, RequestId: "resign"}); err != nil {
		t.Fatal(err)
	}
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		h.Close(context.Background())
	}()
	time.Sleep(300 * time.Millisecond) // Close now waits on A's forgetting
	close(f.saddRelease)
	for isListed(t, h, g1) {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatal("A's seat never unlisted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	// Stream B, still running, delivers its game's end now.
	if _, err := h.Resign(red2, &gamev1.ResignRequest{GameId: g2, RequestId: "resign"}); err != nil {
		t.Fatal(err)
	}
	if err := <-b; err != nil {
		t.Fatal(err)
	}
	<-closed
}
