package main

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/palacehq/palace/pkg/apptest"
	"github.com/palacehq/palace/pkg/auth"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestLoadtestGamesFindsInjectedFaults runs `palace loadtest games`
// through a proxy that does one thing wrong between the tool and a real
// server: a load test that finds nothing wrong is worth something only if
// it finds what is wrong. Each fault must show in the counter the report
// has for it, and make the tool exit 1; through a faithful proxy the
// report stays clean, so the counts come from the faults alone.
func TestLoadtestGamesFindsInjectedFaults(t *testing.T) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	tests := []struct {
		name  string
		fault func() *fault
		// found are the report's counters the fault must raise, clean
		// those it cannot touch; the others may follow from it.
		found, clean []string
		// each, when set, is the counter that must count every injected
		// fault exactly once.
		each string
	}{
		{name: "none", fault: func() *fault { return &fault{} },
			clean: []string{"lost", "duplicated", "gaps", "errors"}},
		{name: "event-dropped", fault: dropMoveEvent(3),
			found: []string{"lost", "gaps"}, clean: []string{"duplicated", "errors"}},
		{name: "event-doubled", fault: doubleFirstMoveEvent,
			found: []string{"duplicated"}, clean: []string{"lost", "gaps", "errors"}},
		{name: "retry-answered-differently", fault: bumpRetriedVersion,
			found: []string{"duplicated"}, clean: []string{"lost", "gaps", "errors"}, each: "duplicated"},
		{name: "move-acknowledged-not-applied", fault: swallowMove(3),
			found: []string{"errors", "lost"}, clean: []string{"duplicated", "gaps"}},
		{name: "answer-without-the-game", fault: answerEmpty(3),
			found: []string{"errors", "lost"}, clean: []string{"gaps"}},
		{name: "stream-cancelled", fault: cancelStreamAfter(3),
			found: []string{"errors"}, clean: []string{"duplicated"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.fault()
			addr := startFaultyProxy(t, upstream, f)
			out, errOut, code := palace("loadtest", "games", "--addr", addr, "--games", "3", "--duration", "1500ms",
				"--floor=false", "--retry-rate", "0.3", "--reconnect-rate", "0.2", "--service-keys", apptest.ServiceKeys)
			var rep gamesReport
			lastJSON(t, out, &rep)
			got := faultCounters(rep)
			t.Logf("injected %d: lost %d, duplicated %d, gaps %d, errors %d (%d moves, %d retries, %d reconnects)",
				f.injected.Load(), rep.Lost, rep.Duplicated, rep.Gaps, rep.Errors, rep.Moves, rep.Retries, rep.Reconnects)
			if rep.Moves == 0 {
				t.Fatalf("no move played through the proxy: %+v\n%s", rep, errOut)
			}
			for _, c := range tc.clean {
				if got[c] != 0 {
					t.Errorf("%s = %d, want 0", c, got[c])
				}
			}
			if tc.found == nil {
				if code != exitOK {
					t.Fatalf("exit %d through a faithful proxy, want %d: %+v\n%s", code, exitOK, rep, errOut)
				}
				// The proxy must relay retries and reconnections faithfully
				// too, or a fault could hide behind its own.
				if rep.Retries == 0 || rep.Reconnects == 0 {
					t.Fatalf("no retries or reconnections through the proxy: %+v", rep)
				}
				return
			}
			if f.injected.Load() == 0 {
				t.Fatalf("the fault never happened: %+v", rep)
			}
			for _, c := range tc.found {
				if got[c] == 0 {
					t.Errorf("%s = 0, want it to count the fault", c)
				}
			}
			if tc.each != "" && got[tc.each] != f.injected.Load() {
				t.Errorf("%s = %d, want one for each of the %d faults", tc.each, got[tc.each], f.injected.Load())
			}
			if code != exitFail {
				t.Errorf("exit %d with faults reported, want %d", code, exitFail)
			}
			if t.Failed() {
				t.Logf("report %+v\n%s", rep, errOut)
			}
		})
	}
}

// faultCounters are the report's fault counters by their JSON names.
func faultCounters(rep gamesReport) map[string]int64 {
	return map[string]int64{"lost": rep.Lost, "duplicated": rep.Duplicated, "gaps": rep.Gaps, "errors": rep.Errors}
}

// fault is what the proxy does wrong; a nil hook forwards its calls as
// they are.
type fault struct {
	// move answers a MakeMove; up reaches the real server, with the
	// caller's credentials in ctx.
	move func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error)
	// events makes the filter of one StreamEvents call.
	events func() eventFilter
	// injected counts the faults done.
	injected atomic.Int64
}

// eventFilter turns a message of the real server's stream into those the
// client gets, or into the error the stream ends with.
type eventFilter func(*gamev1.StreamEventsResponse) ([]*gamev1.StreamEventsResponse, error)

// dropMoveEvent leaves the event of the move at ply out of every stream,
// a reconnection's too: the stream skips a version and misses a move.
func dropMoveEvent(ply uint32) func() *fault {
	return func() *fault {
		f := &fault{}
		f.events = func() eventFilter {
			return func(m *gamev1.StreamEventsResponse) ([]*gamev1.StreamEventsResponse, error) {
				if m.GetEvent().GetMovePlayed().GetPly() == ply {
					f.injected.Add(1)
					return nil, nil
				}
				return []*gamev1.StreamEventsResponse{m}, nil
			}
		}
		return f
	}
}

// doubleFirstMoveEvent sends the first move event of every stream twice.
// Every stream, not one: a client that reconnects right after the first
// copy never reads the second, and the next stream must fault again.
func doubleFirstMoveEvent() *fault {
	f := &fault{}
	f.events = func() eventFilter {
		doubled := false
		return func(m *gamev1.StreamEventsResponse) ([]*gamev1.StreamEventsResponse, error) {
			if doubled || m.GetEvent().GetMovePlayed() == nil {
				return []*gamev1.StreamEventsResponse{m}, nil
			}
			doubled = true
			f.injected.Add(1)
			return []*gamev1.StreamEventsResponse{m, m}, nil
		}
	}
	return f
}

// bumpRetriedVersion answers every second retried MakeMove (a request id
// seen before) with the game one version ahead, as a server that applied
// the retry again would: a retry must get the first answer, whole. The
// faithful retries in between show that the tool counts wrong answers,
// not retries.
func bumpRetriedVersion() *fault {
	f := &fault{}
	var mu sync.Mutex
	seen := map[string]bool{}
	retries := 0
	f.move = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
		mu.Lock()
		retry := seen[req.GetRequestId()]
		seen[req.GetRequestId()] = true
		if retry {
			retries++
		}
		bump := retry && retries%2 == 1
		mu.Unlock()
		resp, err := up.MakeMove(ctx, req)
		if err != nil || !bump {
			return resp, err
		}
		f.injected.Add(1)
		resp.Game.Version++
		return resp, nil
	}
	return f
}

// swallowMove acknowledges the nth move of every game without passing it
// on. Its answer is the game as it stands, the move not echoed and not
// played, and a retry gets the same: a server that loses a move it
// acknowledged. (An empty answer would leave the tool without the game's
// state, so it could neither play on nor resign and end its streams.)
func swallowMove(nth int) func() *fault {
	return func() *fault {
		f := &fault{}
		var mu sync.Mutex
		moves := map[string]int{}                          // distinct requests by game
		swallowed := map[string]*gamev1.MakeMoveResponse{} // answers by request id
		seen := map[string]bool{}
		f.move = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
			mu.Lock()
			if resp, ok := swallowed[req.GetRequestId()]; ok {
				mu.Unlock()
				return resp, nil
			}
			first := !seen[req.GetRequestId()]
			seen[req.GetRequestId()] = true
			if first {
				moves[req.GetGameId()]++
			}
			swallow := first && moves[req.GetGameId()] == nth
			mu.Unlock()
			if !swallow {
				return up.MakeMove(ctx, req)
			}
			g, err := up.GetGame(ctx, &gamev1.GetGameRequest{GameId: req.GetGameId()})
			if err != nil {
				return nil, err
			}
			resp := &gamev1.MakeMoveResponse{Game: g.GetGame()}
			mu.Lock()
			swallowed[req.GetRequestId()] = resp
			mu.Unlock()
			f.injected.Add(1)
			return resp, nil
		}
		return f
	}
}

// answerEmpty answers the nth move of every game with an empty answer,
// without passing it on: the tool has no game to play on, and must still
// end the game and its streams rather than wait for ever.
func answerEmpty(nth int) func() *fault {
	return func() *fault {
		f := &fault{}
		var mu sync.Mutex
		moves := map[string]int{}
		f.move = func(ctx context.Context, up gamev1.GameServiceClient, req *gamev1.MakeMoveRequest) (*gamev1.MakeMoveResponse, error) {
			mu.Lock()
			moves[req.GetGameId()]++
			empty := moves[req.GetGameId()] == nth
			mu.Unlock()
			if !empty {
				return up.MakeMove(ctx, req)
			}
			f.injected.Add(1)
			return &gamev1.MakeMoveResponse{}, nil
		}
		return f
	}
}

// cancelStreamAfter ends every stream with Canceled after n events, as
// if the call had been cancelled, though the client did not cancel it.
func cancelStreamAfter(n int) func() *fault {
	return func() *fault {
		f := &fault{}
		f.events = func() eventFilter {
			events := 0
			return func(m *gamev1.StreamEventsResponse) ([]*gamev1.StreamEventsResponse, error) {
				if m.GetEvent() == nil {
					return []*gamev1.StreamEventsResponse{m}, nil
				}
				if events++; events > n {
					f.injected.Add(1)
					return nil, status.Error(codes.Canceled, "stream cancelled by the faulty proxy")
				}
				return []*gamev1.StreamEventsResponse{m}, nil
			}
		}
		return f
	}
}

// startFaultyProxy serves a gRPC proxy to upstream, with fault f, until
// the test ends, and returns its address.
func startFaultyProxy(t *testing.T, upstream string, f *fault) string {
	t.Helper()
	cc, err := transport{insecure.NewCredentials()}.dial(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultyProxy{up: cc, game: gamev1.NewGameServiceClient(cc), fault: f}
	// With no service registered, every call reaches the unknown-service
	// handler, in raw bytes.
	srv := grpc.NewServer(grpc.UnknownServiceHandler(p.handle), grpc.ForceServerCodecV2(rawCodec{}))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	return lis.Addr().String()
}

type faultyProxy struct {
	up    *grpc.ClientConn
	game  gamev1.GameServiceClient
	fault *fault
}

// handle serves one call, unary or server streaming: every call of the
// game service is one of these.
func (p *faultyProxy) handle(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	ctx := withCredentials(ss.Context())
	switch {
	case method == gamev1.GameService_MakeMove_FullMethodName && p.fault.move != nil:
		var req gamev1.MakeMoveRequest
		if err := recvProto(ss, &req); err != nil {
			return err
		}
		resp, err := p.fault.move(ctx, p.game, &req)
		if err != nil {
			return err
		}
		return sendProto(ss, resp)
	case method == gamev1.GameService_StreamEvents_FullMethodName && p.fault.events != nil:
		var req gamev1.StreamEventsRequest
		if err := recvProto(ss, &req); err != nil {
			return err
		}
		return p.filterEvents(ctx, ss, &req, p.fault.events())
	}
	return p.forward(ctx, ss, method)
}

// filterEvents relays a stream of events through filter.
func (p *faultyProxy) filterEvents(ctx context.Context, ss grpc.ServerStream, req *gamev1.StreamEventsRequest, filter eventFilter) error {
	st, err := p.game.StreamEvents(ctx, req)
	if err != nil {
		return err
	}
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		out, ferr := filter(m)
		for _, o := range out {
			if err := sendProto(ss, o); err != nil {
				return err
			}
		}
		if ferr != nil {
			return ferr
		}
	}
}

// forward relays a call as it is: its request, then every answer, then
// its status.
func (p *faultyProxy) forward(ctx context.Context, ss grpc.ServerStream, method string) error {
	var req []byte
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	cs, err := p.up.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method, grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		return err
	}
	// io.EOF from SendMsg means the call has ended; RecvMsg has its status.
	if err := cs.SendMsg(&req); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	for {
		var resp []byte
		err := cs.RecvMsg(&resp)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := ss.SendMsg(&resp); err != nil {
			return err
		}
	}
}

// forwardedHeaders are the metadata the game service reads: a seat's
// credential and a service's.
var forwardedHeaders = []string{"authorization", auth.ServiceHeader}

// withCredentials is the context of a call to the real server on behalf
// of the call in: its deadline, its cancellation, its credentials.
func withCredentials(in context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(in)
	out := metadata.MD{}
	for _, k := range forwardedHeaders {
		if v := md.Get(k); len(v) > 0 {
			out.Set(k, v...)
		}
	}
	return metadata.NewOutgoingContext(in, out)
}

func recvProto(ss grpc.ServerStream, m proto.Message) error {
	var b []byte
	if err := ss.RecvMsg(&b); err != nil {
		return err
	}
	return proto.Unmarshal(b, m)
}

func sendProto(ss grpc.ServerStream, m proto.Message) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	return ss.SendMsg(&b)
}

// rawCodec passes messages through as their wire bytes (*[]byte), so the
// proxy relays any call without knowing its types. It is named proto
// because that is what the bytes are, and what the server expects.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	// A copy: gRPC reuses data's buffers once this returns.
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }
