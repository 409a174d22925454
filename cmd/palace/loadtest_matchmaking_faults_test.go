package main

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// mmProxy is a matchmaking service that forwards every call the load
// tool makes to a real server, through hooks that may change what it says.
type mmProxy struct {
	matchmakingv1.UnimplementedMatchmakingServiceServer
	up matchmakingv1.MatchmakingServiceClient
	// watch edits each message of a watch before it is relayed.
	watch func(*matchmakingv1.WatchTicketResponse)
	// delay, when set, holds a message that long before it is relayed.
	delay func(*matchmakingv1.WatchTicketResponse) time.Duration
	// cancel, when set, answers CancelTicket instead of the real server.
	cancel   func(ctx context.Context, req *matchmakingv1.CancelTicketRequest) (*matchmakingv1.CancelTicketResponse, error)
	injected atomic.Int64
}

func (p *mmProxy) CreateGuest(ctx context.Context, r *matchmakingv1.CreateGuestRequest) (*matchmakingv1.CreateGuestResponse, error) {
	return p.up.CreateGuest(withCredentials(ctx), r)
}

func (p *mmProxy) EnterQueue(ctx context.Context, r *matchmakingv1.EnterQueueRequest) (*matchmakingv1.EnterQueueResponse, error) {
	return p.up.EnterQueue(withCredentials(ctx), r)
}

func (p *mmProxy) CancelTicket(ctx context.Context, r *matchmakingv1.CancelTicketRequest) (*matchmakingv1.CancelTicketResponse, error) {
	if p.cancel != nil {
		return p.cancel(withCredentials(ctx), r)
	}
	return p.up.CancelTicket(withCredentials(ctx), r)
}

func (p *mmProxy) WatchTicket(r *matchmakingv1.WatchTicketRequest, ss grpc.ServerStreamingServer[matchmakingv1.WatchTicketResponse]) error {
	st, err := p.up.WatchTicket(withCredentials(ss.Context()), r)
	if err != nil {
		return err
	}
	for {
		m, err := st.Recv()
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if p.watch != nil {
			p.watch(m)
		}
		if p.delay != nil {
			select {
			case <-time.After(p.delay(m)):
			case <-ss.Context().Done():
				return ss.Context().Err()
			}
		}
		if err := ss.Send(m); err != nil {
			return err
		}
	}
}

// startMMProxy serves p on loopback in front of upstream.
func startMMProxy(t *testing.T, upstream string, p *mmProxy) string {
	t.Helper()
	return serveMM(t, upstream, p, p)
}

// serveMM serves srv on loopback, p forwarding to upstream.
func serveMM(t *testing.T, upstream string, p *mmProxy, srv matchmakingv1.MatchmakingServiceServer) string {
	t.Helper()
	cc, err := transport{insecure.NewCredentials()}.dial(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	p.up = matchmakingv1.NewMatchmakingServiceClient(cc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	matchmakingv1.RegisterMatchmakingServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// matchedSeat is the seat a watch message tells of once its ticket is
// matched to a game; nil before.
func matchedSeat(m *matchmakingv1.WatchTicketResponse) *matchmakingv1.Seat {
	if s := m.GetTicket().GetSeat(); m.GetTicket().GetState() == matchmakingv1.TicketState_TICKET_STATE_MATCHED && s.GetGameId() != "" {
		return s
	}
	return nil
}

// firstTold remembers, for each game, the first seat a watch told of.
type firstTold struct {
	mu    sync.Mutex
	seats map[string]*matchmakingv1.Seat
}

// of returns the first seat told of s's game: s itself the first time.
func (f *firstTold) of(s *matchmakingv1.Seat) *matchmakingv1.Seat {
	f.mu.Lock()
	defer f.mu.Unlock()
	if first, ok := f.seats[s.GetGameId()]; ok {
		return first
	}
	if f.seats == nil {
		f.seats = map[string]*matchmakingv1.Seat{}
	}
	f.seats[s.GetGameId()] = s
	return s
}

// serveMatchmaking starts a server whose players the load tool mints
// (playerKeys), pairing every 50 ms.
func serveMatchmaking(t *testing.T, extra ...string) string {
	t.Helper()
	return startServe(t, append([]string{"--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		"--player-signing-keys", playerKeys, "--pairing-interval", "50ms"}, extra...)...)
}

// TestLoadtestMatchmakingFindsASeatCredentialOfTheOpponent: matchmaking
// hands the second player told of each game the seat credential of the
// first (the opponent's seat): that player could never move its own
// pieces. The tool never looked at the credentials it was given, and
// passed, even reading every game back (--game-addr); it counts such a
// pairing wrong.
func TestLoadtestMatchmakingFindsASeatCredentialOfTheOpponent(t *testing.T) {
	keys := playerKeys
	addr := serveMatchmaking(t)
	var told firstTold
	p := &mmProxy{}
	p.watch = func(m *matchmakingv1.WatchTicketResponse) {
		if s := matchedSeat(m); s != nil {
			if first := told.of(s); first.GetToken() != s.GetToken() {
				s.Token = first.GetToken()
				p.injected.Add(1)
			}
		}
	}
	proxy := startMMProxy(t, addr, p)
	out, errOut, code := palace("loadtest", "matchmaking", "--addr", proxy, "--game-addr", addr, "--tickets", "8", "--cancel", "0",
		"--player-signing-keys", keys, "--timeout", "30s")
	var rep mmReport
	lastJSON(t, out, &rep)
	if p.injected.Load() == 0 {
		t.Fatalf("no credential swapped; report %+v\n%s", rep, errOut)
	}
	if rep.DoublePaired == 0 || code != exitFail {
		t.Fatalf("%d players handed their opponent's seat credential; report %+v, exit %d; want those pairings counted wrong and exit %d\n%s",
			p.injected.Load(), rep, code, exitFail, errOut)
	}
}

// TestLoadtestMatchmakingRidesOutACancelCutOff: one CancelTicket is
// answered Unavailable, as by a replica going away (the cancel not
// applied), the server otherwise faithful. The tool sent EnterQueue and
// WatchTicket again after Unavailable, as an app would, but gave the cancel
// up at once: its player walked away from a ticket still waiting, which
// the server rightly paired, and the tool counted that pairing wrong
// (double_paired) and exited 1. It sends the cancel again.
func TestLoadtestMatchmakingRidesOutACancelCutOff(t *testing.T) {
	keys := playerKeys
	addr := serveMatchmaking(t)
	p := &mmProxy{}
	p.cancel = func(ctx context.Context, r *matchmakingv1.CancelTicketRequest) (*matchmakingv1.CancelTicketResponse, error) {
		if p.injected.Add(1) == 1 {
			return nil, status.Error(codes.Unavailable, "connection closed (a replica gone)")
		}
		return p.up.CancelTicket(ctx, r)
	}
	proxy := startMMProxy(t, addr, p)
	out, errOut, code := palace("loadtest", "matchmaking", "--addr", proxy, "--tickets", "8", "--cancel", "1", "--concurrency", "8",
		"--player-signing-keys", keys, "--timeout", "20s")
	var rep mmReport
	lastJSON(t, out, &rep)
	if p.injected.Load() == 0 {
		t.Fatalf("no cancel sent; report %+v\n%s", rep, errOut)
	}
	if rep.DoublePaired != 0 || rep.Errors != 0 || code != 0 {
		t.Fatalf("one cancel cut off by a replica going away; report %+v, exit %d; want no wrong pairing, no error and exit 0\n%s", rep, code, errOut)
	}
}

// TestLoadtestMatchmakingWatchesAgainWhenAWatchIsShed: a server that
// serves --max-watches watches already refuses one more with
// ResourceExhausted, which its proto says to retry later. The tool took it
// for an error, and counted the partner's pairing, whose match the refused
// watch never saw, wrong ("double_paired"). It watches again after a
// pause, and a pairing whose partner's word never came is not judged.
func TestLoadtestMatchmakingWatchesAgainWhenAWatchIsShed(t *testing.T) {
	keys := playerKeys
	addr := serveMatchmaking(t, "--max-watches", "2")
	out, errOut, code := palace("loadtest", "matchmaking", "--addr", addr, "--tickets", "8", "--cancel", "0",
		"--player-signing-keys", keys, "--timeout", "30s")
	var rep mmReport
	lastJSON(t, out, &rep)
	if rep.DoublePaired != 0 || code != 0 {
		t.Fatalf("watches shed (ResourceExhausted, retry); report %+v, exit %d; want no pairing counted wrong and exit 0\n%s", rep, code, errOut)
	}
}

// TestLoadtestMatchmakingFindsASeatWithNoSide: without --game-addr the
// tool judges a pairing by what the two tickets say; a server that told one
// player of each game no side (SIDE_UNSPECIFIED) passed, the sides needing
// only to differ. One must be first and the other second.
func TestLoadtestMatchmakingFindsASeatWithNoSide(t *testing.T) {
	keys := playerKeys
	addr := serveMatchmaking(t)
	var told firstTold
	p := &mmProxy{}
	p.watch = func(m *matchmakingv1.WatchTicketResponse) {
		if s := matchedSeat(m); s != nil && told.of(s) == s {
			s.Side = 0
			p.injected.Add(1)
		}
	}
	proxy := startMMProxy(t, addr, p)
	out, errOut, code := palace("loadtest", "matchmaking", "--addr", proxy, "--tickets", "8", "--cancel", "0",
		"--player-signing-keys", keys, "--timeout", "30s")
	var rep mmReport
	lastJSON(t, out, &rep)
	if p.injected.Load() == 0 {
		t.Fatalf("no side blanked; report %+v\n%s", rep, errOut)
	}
	if rep.DoublePaired == 0 || code != exitFail {
		t.Fatalf("%d players told no side; report %+v, exit %d; want those pairings counted wrong and exit %d\n%s",
			p.injected.Load(), rep, code, exitFail, errOut)
	}
}

// renewingMM answers every WatchTicket at once as a connection
// renewed at its age does (Unavailable, debug data "max_age"), and forwards
// the rest.
type renewingMM struct {
	*mmProxy
	watches atomic.Int64
}

func (p *renewingMM) WatchTicket(*matchmakingv1.WatchTicketRequest, grpc.ServerStreamingServer[matchmakingv1.WatchTicketResponse]) error {
	p.watches.Add(1)
	return status.Error(codes.Unavailable, `closing transport due to: connection error: desc = "error reading from server: EOF", received prior goaway: code: NO_ERROR, debug data: "max_age"`)
}

// TestLoadtestMatchmakingPausesBetweenRenewedWatches: a server that cut
// every watch at once as "renewed" got each one opened again at once, with
// no pause, for the whole run: the tool spun, flooding the server it
// measures. A renewed watch cut short is opened again after a pause.
func TestLoadtestMatchmakingPausesBetweenRenewedWatches(t *testing.T) {
	keys := playerKeys
	addr := serveMatchmaking(t)
	p := &renewingMM{mmProxy: &mmProxy{}}
	proxy := serveMM(t, addr, p.mmProxy, p)
	out, errOut, _ := palace("loadtest", "matchmaking", "--addr", proxy, "--tickets", "2", "--cancel", "0",
		"--player-signing-keys", keys, "--timeout", "2s")
	var rep mmReport
	lastJSON(t, out, &rep)
	// An app pausing as the tool does after other failures (100 ms, doubling)
	// opens a watch some 5 times in 2 s; allow 20 per ticket.
	if n := p.watches.Load(); n > 40 {
		t.Fatalf("%d watches opened in 2 s for 2 tickets (rewatched %d): the tool spins on renewed watches\n%s", n, rep.Rewatched, errOut)
	}
}

// TestLoadtestMatchmakingTellsALateWordFromAWrongPairing: the server pairs
// every ticket rightly, but tells the second player of each game late,
// after the run's --timeout. The tool held that ticket for waiting, ignored
// that its cancel at the end was refused FailedPrecondition (it was
// paired), and counted its partner's right pairing wrong. Such a ticket is
// unsettled now, and the pairing it never saw is not judged.
func TestLoadtestMatchmakingTellsALateWordFromAWrongPairing(t *testing.T) {
	keys := playerKeys
	addr := serveMatchmaking(t)
	var told firstTold
	p := &mmProxy{}
	p.delay = func(m *matchmakingv1.WatchTicketResponse) time.Duration {
		if s := matchedSeat(m); s == nil || told.of(s) == s {
			return 0
		}
		p.injected.Add(1)
		return 10 * time.Second
	}
	proxy := startMMProxy(t, addr, p)
	out, errOut, _ := palace("loadtest", "matchmaking", "--addr", proxy, "--tickets", "2", "--cancel", "0",
		"--player-signing-keys", keys, "--timeout", "2s")
	var rep mmReport
	lastJSON(t, out, &rep)
	if p.injected.Load() == 0 {
		t.Fatalf("no word delayed; report %+v\n%s", rep, errOut)
	}
	if rep.DoublePaired != 0 {
		t.Fatalf("a right pairing, told one player late; report %+v; want no pairing counted wrong\n%s", rep, errOut)
	}
}
