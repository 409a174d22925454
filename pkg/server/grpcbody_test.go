package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// TestANativeRequestThatNeverComesIsRefused: a native gRPC call whose
// request message never comes, or stops part way, is answered
// DeadlineExceeded once Config.BodyTimeout has passed, without reaching
// the service, on grpc-go's own connections and on shared ones alike; a
// whole request is served, and a stream that outlasts the timeout once
// its request has come goes on.
func TestANativeRequestThatNeverComesIsRefused(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			calls := new(atomic.Int64)
			addr, _ := startServerWith(t, Config{BodyTimeout: timeout, SharedConnections: shared}, func(s *Server) {
				s.RegisterService(&gamev1.GameService_ServiceDesc, slowEvents{calls: calls, pause: 3 * timeout})
			})
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			// Headers alone: a stream opened and never sent on.
			for _, method := range []string{"GetGame", "StreamEvents"} {
				cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/palace.game.v1.GameService/"+method)
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				err = cs.RecvMsg(new(gamev1.GetGameResponse))
				// grpc-go's transport words the refusal itself.
				if status.Code(err) != codes.DeadlineExceeded || shared && !strings.Contains(status.Convert(err).Message(), "did not arrive within 300ms") {
					t.Fatalf("%s without its request: %v, want DeadlineExceeded (saying it did not arrive within 300ms, on a shared connection)", method, err)
				}
				// Not the client's own deadline, 10 s away.
				if took := time.Since(start); took < timeout || took > 5*time.Second {
					t.Fatalf("%s refused after %v, want soon after the %v timeout", method, took, timeout)
				}
			}

			// Part of a request: 3 bytes of a message's 5-byte prefix.
			pr, pw := io.Pipe()
			defer pw.Close()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/GetGame", pr)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("TE", "trailers")
			go func() { _, _ = pw.Write([]byte{0, 0, 0}) }()
			var h2c http.Protocols
			h2c.SetUnencryptedHTTP2(true)
			client := &http.Client{Transport: &http.Transport{Protocols: &h2c}}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("part of a request: no answer: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got := resp.Trailer.Get("Grpc-Status") + resp.Header.Get("Grpc-Status")
			if got != "4" || shared && !strings.Contains(resp.Trailer.Get("Grpc-Message")+resp.Header.Get("Grpc-Message"), "did%20not%20arrive") {
				t.Fatalf("part of a request: grpc-status %q (%q), want 4 (DeadlineExceeded) saying it did not arrive", got, resp.Trailer.Get("Grpc-Message")+resp.Header.Get("Grpc-Message"))
			}
			if n := calls.Load(); n != 0 {
				t.Fatalf("%d calls reached the service", n)
			}

			// Whole requests are served; a stream outlives the timeout.
			game := gamev1.NewGameServiceClient(cc)
			if _, err := game.GetGame(ctx, &gamev1.GetGameRequest{GameId: "some-game-id"}); err != nil {
				t.Fatalf("a whole request: %v", err)
			}
			stream, err := game.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: "some-game-id"})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if _, err := stream.Recv(); err != nil {
					t.Fatalf("a stream lasting %v: message %d: %v", 3*timeout, i+1, err)
				}
			}
			if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
				t.Fatalf("a stream lasting %v ended with %v, want its clean end", 3*timeout, err)
			}
		})
	}
}

// TestTheWaitForARequestEndsOnce: a call's context ends DeadlineExceeded
// if its request is late, and as its parent does otherwise; contexts
// derived from it follow, saying why, and its error never changes once
// it has ended.
func TestTheWaitForARequestEndsOnce(t *testing.T) {
	const limit = 20 * time.Millisecond
	wait := func(ctx context.Context) {
		t.Helper()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the context never ended")
		}
	}

	parent, cancel := context.WithCancel(context.Background())
	w := newBodyWait(parent, limit)
	child, stop := context.WithCancel(w)
	defer stop()
	wait(child)
	if !errors.Is(w.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(child), errLateBody) {
		t.Fatalf("late: %v, derived %v; want DeadlineExceeded, and the derived one's cause %v", w.Err(), context.Cause(child), errLateBody)
	}
	if _, ok := w.Deadline(); ok {
		t.Fatal("late: the timeout reported as the call's deadline")
	}
	cancel()
	if !errors.Is(w.Err(), context.DeadlineExceeded) {
		t.Fatalf("late, then the call ended: %v, want DeadlineExceeded still", w.Err())
	}

	parent, cancel = context.WithCancel(context.Background())
	w = newBodyWait(parent, limit)
	w.arrive()
	child, stop = context.WithCancel(w)
	defer stop()
	time.Sleep(5 * limit)
	if w.Err() != nil || child.Err() != nil {
		t.Fatalf("arrived: %v, derived %v, after the timeout; want none", w.Err(), child.Err())
	}
	cancel()
	wait(child)
	if !errors.Is(w.Err(), context.Canceled) || !errors.Is(child.Err(), context.Canceled) {
		t.Fatalf("arrived, then the call ended: %v, derived %v; want Canceled", w.Err(), child.Err())
	}

	parent, cancel = context.WithCancel(context.Background())
	w = newBodyWait(parent, limit)
	cancel()
	wait(w)
	time.Sleep(5 * limit)
	if !errors.Is(w.Err(), context.Canceled) {
		t.Fatalf("the call ended before the timeout: %v, want Canceled", w.Err())
	}
}

// TestANativeRequestNeverEndedIsRefused: a native gRPC call whose client
// sends its whole request message but never ends its half of the stream
// (no END_STREAM) is held by grpc-go, which reads on for the end before it
// runs a method that does not stream from the client. The body timeout was
// lifted when the message came, so the call, its stream and its goroutine
// waited for as long as the connection lived (30 minutes by default, for
// ever with --max-connection-age 0), where the same request over Connect
// is refused DEADLINE_EXCEEDED at the body timeout.
func TestANativeRequestNeverEndedIsRefused(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, shared := range []bool{false, true} {
		for _, method := range []string{"GetGame", "StreamEvents"} {
			t.Run(fmt.Sprintf("shared=%v %s", shared, method), func(t *testing.T) {
				var calls atomic.Int64
				addr, _ := startServerWith(t, Config{BodyTimeout: timeout, SharedConnections: shared}, func(s *Server) {
					s.RegisterService(&gamev1.GameService_ServiceDesc, slowEvents{calls: &calls})
				})
				cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				defer cc.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/palace.game.v1.GameService/"+method)
				if err != nil {
					t.Fatal(err)
				}
				var req proto.Message = &gamev1.GetGameRequest{GameId: "g"}
				if method == "StreamEvents" {
					req = &gamev1.StreamEventsRequest{GameId: "g"}
				}
				if err := cs.SendMsg(req); err != nil {
					t.Fatal(err)
				}
				// No CloseSend: the request's message came, its end never does.
				start := time.Now()
				err = cs.RecvMsg(new(gamev1.GetGameResponse))
				took := time.Since(start)
				if status.Code(err) != codes.DeadlineExceeded || took > 2500*time.Millisecond || calls.Load() != 0 {
					t.Fatalf("answered after %v (the client's own deadline 3 s away, the body timeout %v), handler ran %v: %v; want DeadlineExceeded soon after the body timeout, the handler not run",
						took.Round(100*time.Millisecond), timeout, calls.Load() > 0, err)
				}
			})
		}
	}
}

// TestAnUnknownMethodIsUnimplementedAtOnce: a native call of a method the
// server does not have (a bidi call of a newer API), whose client sends
// its first message, or nothing, and waits for the answer before it
// closes its side, is answered Unimplemented at once, as grpc-go's own
// transport does. On a shared connection (SharedConnections) such a call
// with its message sent waited for the client's end of the stream, taken
// for a method of one message, and was refused DeadlineExceeded at the
// body timeout (30 s by default); one with nothing sent waited for its
// first message as long.
func TestAnUnknownMethodIsUnimplementedAtOnce(t *testing.T) {
	const timeout = 500 * time.Millisecond
	for _, c := range []struct{ shared, send bool }{{false, true}, {false, false}, {true, true}, {true, false}} {
		t.Run(fmt.Sprintf("shared=%v send=%v", c.shared, c.send), func(t *testing.T) {
			shared := c.shared
			addr, _ := startServerWith(t, Config{BodyTimeout: timeout, SharedConnections: shared})
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/palace.game.v2.GameService/Play")
			if err != nil {
				t.Fatal(err)
			}
			if c.send {
				_ = cs.SendMsg(&gamev1.GetGameRequest{GameId: "g"})
			}
			start := time.Now()
			err = cs.RecvMsg(new(gamev1.GetGameResponse))
			if status.Code(err) != codes.Unimplemented || time.Since(start) > timeout/2 {
				t.Fatalf("unknown bidi method: %v after %v; want Unimplemented at once", err, time.Since(start).Round(10*time.Millisecond))
			}
		})
	}
}
