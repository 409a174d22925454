package game_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// countingConn counts the bytes a client connection reads.
type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// TestStreamsThatNoOneReadsStayWithinTheirSeatsLimit: a seat's client
// that opens event streams and reads none of them (a bug, or on purpose)
// has the server's sends to each block once flow control is full; a
// stream so blocked never sees that a newer one replaced it. The seat
// must still hold a bounded number of the process' places, so that the
// other players' streams are admitted.
func TestStreamsThatNoOneReadsStayWithinTheirSeatsLimit(t *testing.T) {
	// A heartbeat each millisecond fills a stream's flow control (the
	// client's 64 KiB window, then the server's 64 KiB write quota) in
	// seconds.
	env := gametest.Start(t, func(c *game.Config) {
		c.Heartbeat, c.MaxStreams, c.MaxSpectatorStreams, c.MaxSeatStreams = time.Millisecond, 3, 1, 1
	})
	tb := xiangqi(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Each stalled stream on a connection of its own, with a fixed
	// window, so that what its client took in tells when it is full.
	stall := func() {
		t.Helper()
		read := new(atomic.Int64)
		cc, err := grpc.NewClient(env.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<20),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
				return countingConn{c, read}, err
			}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		if _, err := gamev1.NewGameServiceClient(cc).StreamEvents(gametest.As(ctx, tb.seats[commonv1.Side_SIDE_FIRST]), &gamev1.StreamEventsRequest{GameId: tb.id}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for read.Load() < 1<<16 {
			if time.Since(start) > 30*time.Second {
				t.Fatalf("the stalled stream's window is not full after %v (%d bytes)", time.Since(start), read.Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
		// As long again fills the server's write quota: sends block.
		time.Sleep(2 * time.Since(start))
	}
	// The seat holds one stream, and one replaced that has not left.
	for range 2 {
		stall()
	}
	open := func(side commonv1.Side) error {
		st, err := env.Client.StreamEvents(gametest.As(ctx, tb.seats[side]), &gamev1.StreamEventsRequest{GameId: tb.id})
		if err == nil {
			_, err = st.Recv()
		}
		return err
	}
	err := open(commonv1.Side_SIDE_FIRST)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "reads none of them") {
		t.Fatalf("a third stream of the seat, beside two unread ones: %v, want ResourceExhausted saying its client reads none of them", err)
	}
	if err := open(commonv1.Side_SIDE_SECOND); err != nil {
		t.Fatalf("the other seat's stream, beside the first seat's unread ones: %v", err)
	}
}
