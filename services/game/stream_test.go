package game_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/auth"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/newest"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
	"github.com/palacehq/palace/services/game/internal/store"
)

// playRandom plays up to n random legal moves (fewer if the game ends).
func playRandom(t *testing.T, tb *table, n int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for range n {
		g := tb.get(t)
		if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
			return
		}
		tb.move(t, g.GetLegalMoves()[rng.IntN(len(g.GetLegalMoves()))].GetCoordinate())
	}
}

// TestStreamResumesExactlyOnce reads a game's events while it is being
// played, dropping the connection at random points and resuming from the
// last version seen: every version must arrive exactly once, in order.
func TestStreamResumesExactlyOnce(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := xiangqi(t, env)
	done := make(chan struct{})
	go func() {
		defer close(done)
		playRandom(t, tb, 150, 7)
		_, _ = env.Client.Resign(tb.as(tb.get(t).GetTurn()), &gamev1.ResignRequest{GameId: tb.id, RequestId: rid()})
	}()
	rng := rand.New(rand.NewPCG(3, 4))
	var seen []uint64
	var last uint64
	ended := false
	for reconnects := 0; !ended; reconnects++ {
		if reconnects > 10000 {
			t.Fatal("stream never reached the end of the game")
		}
		ctx, cancel := context.WithCancel(context.Background())
		st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: last})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		budget := rng.IntN(8)
		for !ended && budget >= 0 {
			m, err := st.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("recv: %v", err)
			}
			if e := m.GetEvent(); e != nil {
				seen = append(seen, e.GetVersion())
				last = e.GetVersion()
				ended = e.GetGameEnded() != nil
				budget--
			}
		}
		cancel()
	}
	<-done
	final := tb.get(t).GetVersion()
	if uint64(len(seen)) != final {
		t.Fatalf("saw %d events, the game has %d", len(seen), final)
	}
	for i, v := range seen {
		if v != uint64(i+1) {
			t.Fatalf("event %d has version %d: %v", i, v, seen)
		}
	}
}

// TestStreamOfAnEndedGameCompletes: a stream that starts at or after a
// finished game's last event has nothing more to wait for and completes
// (OK) at once, after the snapshot when one is asked for; one that starts
// before it completes after that event.
func TestStreamOfAnEndedGameCompletes(t *testing.T) {
	env := gametest.Start(t, func(c *game.Config) { c.Heartbeat = 500 * time.Millisecond })
	tb := xiangqi(t, env)
	tb.move(t, "h3e3")
	if _, err := env.Client.Resign(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.ResignRequest{GameId: tb.id, RequestId: rid()}); err != nil {
		t.Fatal(err)
	}
	final := tb.get(t).GetVersion()
	for _, req := range []*gamev1.StreamEventsRequest{
		{GameId: tb.id, Snapshot: true},
		{GameId: tb.id, AfterVersion: final},
		{GameId: tb.id, AfterVersion: final - 1},
		{GameId: tb.id, AfterVersion: final, Snapshot: true},
	} {
		ctx, cancel := context.WithTimeout(tb.as(commonv1.Side_SIDE_FIRST), 2*time.Second)
		st, err := env.Client.StreamEvents(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			m, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("stream %v of the ended game: %v after %v; want it complete", req, err, got)
			}
			switch {
			case m.GetSnapshot() != nil:
				got = append(got, fmt.Sprintf("snapshot@%d", m.GetSnapshot().GetVersion()))
			case m.GetEvent() != nil:
				got = append(got, fmt.Sprintf("event@%d", m.GetEvent().GetVersion()))
			default:
				got = append(got, "heartbeat")
			}
		}
		cancel()
		want := []string{}
		if req.GetSnapshot() {
			want = append(want, fmt.Sprintf("snapshot@%d", final))
		} else if req.GetAfterVersion() < final {
			want = append(want, fmt.Sprintf("event@%d", final))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("stream %v of the ended game sent %v, want %v", req, got, want)
		}
	}
}

func TestStreamSnapshotThenLiveAndHeartbeat(t *testing.T) {
	const heartbeat = 400 * time.Millisecond
	env := gametest.Start(t, func(c *game.Config) { c.Heartbeat = heartbeat })
	tb := xiangqi(t, env)
	tb.move(t, "h3e3")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.Recv()
	if err != nil || m.GetSnapshot().GetVersion() != 3 {
		t.Fatalf("first message %v (%v), want a snapshot at version 3", m, err)
	}
	// A heartbeat arrives while nothing happens, one interval after the
	// last message (with room for a slow machine), not two.
	quiet := time.Now()
	for {
		m, err = st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.GetHeartbeat() != nil {
			break
		}
		quiet = time.Now()
	}
	if gap := time.Since(quiet); gap > heartbeat*7/4 {
		t.Fatalf("%v without a message on a %v heartbeat", gap, heartbeat)
	}
	tb.move(t, "h10g8")
	for {
		m, err = st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e := m.GetEvent(); e != nil {
			if e.GetVersion() != 4 || e.GetMovePlayed().GetMove().GetCoordinate() != "h10g8" {
				t.Fatalf("live event %v, want h10g8 at version 4", e)
			}
			return
		}
	}
}

func TestSeatStreamsAnnouncePresence(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI})
	ctx, cancel := context.WithCancel(tb.as(commonv1.Side_SIDE_SECOND))
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if pc := m.GetEvent().GetPlayerConnection(); pc != nil {
			if pc.GetSide() != commonv1.Side_SIDE_SECOND || !pc.GetConnected() {
				t.Fatalf("presence %v", pc)
			}
			break
		}
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		g := tb.get(t)
		if g.GetVersion() == 4 {
			return // created, started, connected, disconnected
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no disconnection event: version %d", tb.get(t).GetVersion())
}

// A seat stream that reconnects within the presence grace announces
// nothing; one that stays away is announced disconnected after it.
func TestQuickReconnectionAnnouncesNothing(t *testing.T) {
	env := gametest.Start(t, func(c *game.Config) { c.PresenceGrace = time.Second })
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI})
	open := func(after uint64) (gamev1.GameService_StreamEventsClient, context.CancelFunc) {
		ctx, cancel := context.WithCancel(tb.as(commonv1.Side_SIDE_SECOND))
		st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: after})
		if err != nil {
			t.Fatal(err)
		}
		return st, cancel
	}
	st, cancel := open(0)
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.GetEvent().GetPlayerConnection() != nil {
			break
		}
	}
	connected := tb.get(t).GetVersion()
	cancel()
	st, cancel = open(connected)
	defer cancel()
	time.Sleep(300 * time.Millisecond)
	tb.move(t, "h3e3")
	m, err := st.Recv()
	for err == nil && m.GetHeartbeat() != nil {
		m, err = st.Recv()
	}
	if err != nil {
		t.Fatal(err)
	}
	if e := m.GetEvent(); e.GetVersion() != connected+1 || e.GetMovePlayed() == nil {
		t.Fatalf("after reconnecting: %v, want the move at version %d and no presence event", m, connected+1)
	}
	cancel()
	start := time.Now()
	for {
		g := tb.get(t)
		if g.GetVersion() == connected+2 {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("no disconnection: version %d", g.GetVersion())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Fatalf("disconnection announced after %v, before the grace of 1s", waited)
	}
}

// TestARolloutAnnouncesNoDisconnection: a process that stops (a rolling
// deploy) ends its seat streams UNAVAILABLE, and a client that resumes on
// another process within the presence grace, as after any dropped
// connection, is announced nothing. The stopping process used to record
// its held-back closings at once, so every deploy showed the opponents of
// every player it served a "disconnected", then a "connected". A seat
// whose client does not come back is still announced disconnected.
func TestARolloutAnnouncesNoDisconnection(t *testing.T) {
	const grace = 2 * time.Second
	edit := func(c *game.Config) { c.PresenceGrace, c.SigningKeys = grace, keyOne }
	stays := gametest.Start(t, edit)
	stops := gametest.Start(t, func(c *game.Config) { edit(c); c.KeyPrefix = stays.Config.KeyPrefix })
	tb := create(t, stays, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pcs := presenceEvents(ctx, t, stays, tb.id)

	own, err := grpc.NewClient(stops.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	// Both seats stream from the process that stops; the first one's
	// client comes back on the other, the second one's does not.
	streams := map[commonv1.Side]gamev1.GameService_StreamEventsClient{}
	for _, side := range []commonv1.Side{commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND} {
		st, err := gamev1.NewGameServiceClient(own).StreamEvents(gametest.As(ctx, tb.seats[side]), &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
		if err != nil {
			t.Fatal(err)
		}
		streams[side] = st
		if pc := <-pcs; !pc.GetConnected() || pc.GetSide() != side {
			t.Fatalf("presence event %v, want %v connected", pc, side)
		}
	}
	last := tb.get(t).GetVersion()

	go stops.Stop()
	for side, st := range streams {
		for {
			if _, err := st.Recv(); err != nil {
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("%v's stream of the stopping process ended with %v, want UNAVAILABLE", side, err)
				}
				break
			}
		}
	}
	time.Sleep(300 * time.Millisecond)
	back, err := stays.Client.StreamEvents(gametest.As(ctx, tb.seats[commonv1.Side_SIDE_FIRST]), &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: last})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			if _, err := back.Recv(); err != nil {
				return
			}
		}
	}()

	var got []string
	timeout := time.After(grace + 2*time.Second)
	for gone := false; !gone; {
		select {
		case pc := <-pcs:
			got = append(got, fmt.Sprintf("%v:%v", pc.GetSide(), pc.GetConnected()))
			gone = pc.GetSide() == commonv1.Side_SIDE_SECOND && !pc.GetConnected()
		case <-timeout:
			t.Fatalf("the seat whose client did not come back was not announced disconnected: %v", got)
		}
	}
	for _, g := range got {
		if g == "SIDE_FIRST:false" {
			t.Fatalf("the opponent saw %v after the first seat's stream moved, within the grace of %v, from a stopping process to another", got, grace)
		}
	}
}

// TestAClientReconnectingInALoopCommitsFewEvents: a seat's client that
// opens a stream, waits to be shown connected, drops it and waits to be
// shown disconnected, again and again, committed two events per cycle to
// the game's log, with no move played and nothing but the game's
// --live-ttl to bound it (some 57,600 a day at the default grace). The
// hold of a seat's closing doubles with each one announced lately, so the
// log grows by a few events an hour.
func TestAClientReconnectingInALoopCommitsFewEvents(t *testing.T) {
	const grace = 20 * time.Millisecond
	env := gametest.Start(t, func(c *game.Config) { c.PresenceGrace = grace })
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI})
	before := tb.get(t).GetVersion()
	cycles := 0
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); cycles++ {
		ctx, cancel := context.WithCancel(tb.as(commonv1.Side_SIDE_SECOND))
		st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
		if err != nil {
			t.Fatal(err)
		}
		for {
			m, err := st.Recv()
			if err != nil {
				t.Fatalf("cycle %d: %v", cycles, err)
			}
			if m.GetEvent().GetPlayerConnection().GetConnected() || slices.Contains(m.GetSnapshot().GetConnected(), commonv1.Side_SIDE_SECOND) {
				break
			}
		}
		cancel()
		// Back as soon as the disconnection is announced, or at the end.
		for v := tb.get(t).GetVersion(); tb.get(t).GetVersion() == v && time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	// Holds of 20, 40, 80 ... 640 ms: at most seven disconnections in 2 s.
	if grew := tb.get(t).GetVersion() - before; grew > 2*7+2 {
		t.Fatalf("%d cycles of reconnection in 2 s took the game from version %d to %d: the log grows by two per reconnection", cycles, before, before+grew)
	}
}

// presenceEvents collects the PlayerConnection events of a spectator's
// stream.
func presenceEvents(ctx context.Context, t *testing.T, env *gametest.Env, id string) <-chan *gamev1.PlayerConnection {
	t.Helper()
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: id, Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan *gamev1.PlayerConnection, 256)
	go func() {
		defer close(out)
		for {
			m, err := st.Recv()
			if err != nil {
				return
			}
			if pc := m.GetEvent().GetPlayerConnection(); pc != nil {
				out <- pc
			}
		}
	}()
	return out
}

// A stream that connects to a process whose last commit of the game is
// behind (another process moved since) starts from the stored game, not
// from the process's own: asking for the newer version is not out of
// range, and the later events arrive.
func TestStreamOnAProcessThatIsBehind(t *testing.T) {
	a := gametest.Start(t, func(c *game.Config) { c.SigningKeys = keyOne })
	b := gametest.Start(t, func(c *game.Config) { c.KeyPrefix = a.Config.KeyPrefix; c.SigningKeys = keyOne })
	tb := xiangqi(t, a) // a has the game as created
	tb.env = b
	moved := tb.move(t, "h3e3").GetGame().GetVersion()
	ctx, cancel := context.WithCancel(tb.as(commonv1.Side_SIDE_SECOND))
	defer cancel()
	st, err := a.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: moved})
	if err != nil {
		t.Fatal(err)
	}
	tb.move(t, "h10g8")
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("stream from version %d on the process that is behind: %v", moved, err)
		}
		if e := m.GetEvent(); e.GetMovePlayed() != nil {
			if e.GetVersion() <= moved || e.GetMovePlayed().GetMove().GetCoordinate() != "h10g8" {
				t.Fatalf("first move streamed: %v, want h10g8 after version %d", e, moved)
			}
			return
		}
	}
}

// TestMovesGetThroughReconnectStorms plays a game while many seat streams
// of it open and close as fast as they can, each one a presence commit
// racing the moves: every move must still be applied at the first request.
func TestMovesGetThroughReconnectStorms(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := xiangqi(t, env)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var churn sync.WaitGroup
	var reconnects atomic.Int64
	for i := range 16 {
		side := []commonv1.Side{commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND}[i%2]
		churn.Go(func() {
			for ctx.Err() == nil {
				sctx, cancel := context.WithCancel(gametest.As(ctx, tb.seats[side]))
				st, err := env.Client.StreamEvents(sctx, &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
				if err == nil {
					_, err = st.Recv()
				}
				cancel()
				if err == nil {
					reconnects.Add(1)
				}
			}
		})
	}
	playRandom(t, tb, 40, 9)
	stop()
	churn.Wait()
	if reconnects.Load() < 100 {
		t.Fatalf("only %d reconnects: the storm did not happen", reconnects.Load())
	}
}

// Browsers stream over Connect (JSON here), through the same handler that
// sends events encoded once for every stream: the events arrive as JSON.
func TestStreamOverConnect(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := xiangqi(t, env)
	tb.move(t, "h3e3")
	body, _ := json.Marshal(map[string]any{"gameId": tb.id})
	frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(body)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+env.Addr+"/palace.game.v1.GameService/StreamEvents", bytes.NewReader(append(frame, body...)))
	req.Header.Set("Content-Type", "application/connect+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for {
		var head [5]byte
		if _, err := io.ReadFull(resp.Body, head[:]); err != nil {
			t.Fatalf("stream ended before the move: %v", err)
		}
		msg := make([]byte, binary.BigEndian.Uint32(head[1:]))
		if _, err := io.ReadFull(resp.Body, msg); err != nil {
			t.Fatal(err)
		}
		if head[0]&2 != 0 {
			t.Fatalf("end of stream before the move: %s", msg)
		}
		var m struct {
			Event struct {
				Version    string `json:"version"`
				MovePlayed *struct {
					Move struct {
						Coordinate string `json:"coordinate"`
					} `json:"move"`
				} `json:"movePlayed"`
			} `json:"event"`
		}
		if err := json.Unmarshal(msg, &m); err != nil {
			t.Fatalf("%s: %v", msg, err)
		}
		if mp := m.Event.MovePlayed; mp != nil {
			if mp.Move.Coordinate != "h3e3" || m.Event.Version == "" {
				t.Fatalf("move event %s", msg)
			}
			return
		}
	}
}

// waitPresence reads st until side's presence is announced, failing when
// it is announced otherwise than connected, or not within five seconds.
func waitPresence(t *testing.T, st gamev1.GameService_StreamEventsClient, side commonv1.Side, connected bool) time.Time {
	t.Helper()
	// Heartbeats keep the stream talking, so the deadline is checked.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("waiting for presence %v of %v: %v", connected, side, err)
		}
		if pc := m.GetEvent().GetPlayerConnection(); pc != nil && pc.GetSide() == side {
			if pc.GetConnected() != connected {
				t.Fatalf("presence %v of %v, want %v", pc.GetConnected(), side, connected)
			}
			return time.Now()
		}
	}
	t.Fatalf("no presence %v of %v within 5s", connected, side)
	return time.Time{}
}

// presenceLease is the lease of the presence tests: long enough that a
// loaded machine renews in time (every 500ms).
const presenceLease = 1500 * time.Millisecond

// startLosable starts a game service that reaches Redis through toRedis,
// to be cut off, with short presence leases and no grace; edit configures
// other processes of the same deployment alike.
func startLosable(t *testing.T) (prefix string, edit func(*game.Config), toRedis *redistest.Proxy, lost *gametest.Env) {
	t.Helper()
	prefix = redistest.Prefix(t)
	edit = func(c *game.Config) {
		c.KeyPrefix, c.SigningKeys, c.PresenceLease, c.PresenceGrace = prefix, keyOne, presenceLease, 0
	}
	toRedis = redistest.NewProxy(t, redistest.Addr(t))
	return prefix, edit, toRedis, gametest.StartOn(t, toRedis.Addr(), edit)
}

// TestSeatsOfALostProcessAreReleased: the process holding a seat's stream
// loses Redis for good (as one that dies does), so it cannot record the
// stream closing. Once its lease runs out, another process announces the
// seat disconnected; a live process's seat is never released. When the
// lost process reaches Redis again, it finds its lease gone and holds the
// seat again.
func TestSeatsOfALostProcessAreReleased(t *testing.T) {
	_, edit, toRedis, lost := startLosable(t)
	other := gametest.Start(t, edit)
	tb := create(t, other, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true})

	watch, err := other.Client.StreamEvents(context.Background(), &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	seat, err := lost.Client.StreamEvents(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	defer seat.CloseSend()
	waitPresence(t, watch, commonv1.Side_SIDE_FIRST, true)

	// Leases are renewed: three of them later the seat is still held.
	time.Sleep(3 * presenceLease)
	tb.move(t, "h3e3")
	for {
		m, err := watch.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.GetEvent().GetPlayerConnection() != nil {
			t.Fatalf("presence changed while its process lived: %v", m)
		}
		if m.GetEvent().GetMovePlayed() != nil {
			break
		}
	}

	toRedis.Cut()
	cut := time.Now()
	released := waitPresence(t, watch, commonv1.Side_SIDE_FIRST, false)
	if d := released.Sub(cut); d < presenceLease/2 {
		t.Fatalf("released %v after the cut, before the lease could run out", d)
	}
	toRedis.Restore()
	waitPresence(t, watch, commonv1.Side_SIDE_FIRST, true)
}

// TestAReleaseCutShortIsFinished: the process that claims a lost
// process's lease dies (or loses Redis) before it has released the seats.
// Its claim runs out in turn, and another process finishes the release,
// instead of the seats showing connected for ever.
func TestAReleaseCutShortIsFinished(t *testing.T) {
	prefix, edit, toRedis, lost := startLosable(t)
	tb := create(t, lost, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true})
	seat, err := lost.Client.StreamEvents(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	defer seat.CloseSend()
	waitPresence(t, seat, commonv1.Side_SIDE_FIRST, true)
	rdb := redistest.Client(t)
	ctx := context.Background()
	procs, err := rdb.ZRange(ctx, prefix+"{presence}:procs", 0, -1).Result()
	if err != nil || len(procs) != 1 {
		t.Fatalf("leases %v, %v: want the lost process's alone", procs, err)
	}

	toRedis.Cut()
	time.Sleep(presenceLease + 200*time.Millisecond)
	claimant, err := store.New(rdb, store.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if proc, err := claimant.Claim(ctx, procs[0], time.Now(), time.Now().Add(presenceLease)); err != nil || proc != procs[0] {
		t.Fatalf("claim: %q, %v", proc, err)
	}
	// The claimant dies here, having released nothing.

	other := gametest.Start(t, edit)
	g, err := other.Client.GetGame(ctx, &gamev1.GetGameRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	watch, err := other.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: g.GetGame().GetVersion()})
	if err != nil {
		t.Fatal(err)
	}
	waitPresence(t, watch, commonv1.Side_SIDE_FIRST, false)
}

// heldSeats is every seat listed as held by the processes under prefix.
func heldSeats(t *testing.T, env *gametest.Env) []string {
	t.Helper()
	ctx := context.Background()
	keys, err := env.Redis.Keys(ctx, env.Config.KeyPrefix+"{presence:*}:games").Result()
	if err != nil {
		t.Fatal(err)
	}
	var seats []string
	for _, k := range keys {
		m, err := env.Redis.SMembers(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		seats = append(seats, m...)
	}
	return seats
}

// A process lists the seats it holds while it holds them, and no longer:
// not after the seat's stream closed, nor after the game ended. A read of
// the game names the connected seats alike.
func TestHeldSeatsAreListedWhileHeld(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true})
	watch, err := env.Client.StreamEvents(context.Background(), &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	open := func(side commonv1.Side) context.CancelFunc {
		ctx, cancel := context.WithCancel(tb.as(side))
		if _, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id}); err != nil {
			t.Fatal(err)
		}
		waitPresence(t, watch, side, true)
		return cancel
	}
	closeFirst := open(commonv1.Side_SIDE_FIRST)
	defer open(commonv1.Side_SIDE_SECOND)()
	if got := heldSeats(t, env); len(got) != 2 {
		t.Fatalf("held seats %v, want both", got)
	}
	if got := tb.get(t).GetConnected(); len(got) != 2 {
		t.Fatalf("game read with both seats streaming says %v are connected", got)
	}
	closeFirst()
	waitPresence(t, watch, commonv1.Side_SIDE_FIRST, false)
	// The seat is taken off the list just after the commit that announced
	// its closing, so the list may lag the event by a moment.
	waitHeld(t, env, "after the first closed", tb.id+"|1")
	if got := tb.get(t).GetConnected(); len(got) != 1 || got[0] != commonv1.Side_SIDE_SECOND {
		t.Fatalf("game read after the first seat left says %v are connected", got)
	}
	if _, err := env.Client.Resign(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.ResignRequest{GameId: tb.id, RequestId: rid()}); err != nil {
		t.Fatal(err)
	}
	if got := tb.get(t).GetConnected(); len(got) != 0 {
		t.Fatalf("game read after its end says %v are connected", got)
	}
	waitHeld(t, env, "after the game ended")
}

// waitHeld waits up to 5 s for the held seats to be want.
func waitHeld(t *testing.T, env *gametest.Env, when string, want ...string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		got := heldSeats(t, env)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("held seats %v %s, want %v", got, when, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClosingLostToARedisOutageIsRecordedLater: a seat's stream closes
// while its process cannot reach Redis, for less than a lease. The
// closing is recorded once Redis is back, so the seat does not stay
// connected.
func TestClosingLostToARedisOutageIsRecordedLater(t *testing.T) {
	prefix := redistest.Prefix(t)
	edit := func(c *game.Config) {
		// Renewals (and retries) every 2s; the lease cannot run out
		// during the cut, so only the retry can record the closing.
		c.KeyPrefix, c.SigningKeys, c.PresenceLease, c.PresenceGrace = prefix, keyOne, 6*time.Second, 0
	}
	toRedis := redistest.NewProxy(t, redistest.Addr(t))
	flaky := gametest.StartOn(t, toRedis.Addr(), edit)
	other := gametest.Start(t, edit)
	tb := create(t, other, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true})
	watch, err := other.Client.StreamEvents(context.Background(), &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(tb.as(commonv1.Side_SIDE_FIRST))
	if _, err := flaky.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id}); err != nil {
		t.Fatal(err)
	}
	waitPresence(t, watch, commonv1.Side_SIDE_FIRST, true)
	toRedis.Cut()
	cancel()
	// Longer than the Redis client's own retries, shorter than the lease.
	time.Sleep(1500 * time.Millisecond)
	toRedis.Restore()
	restored := time.Now()
	// The process lives and renews its lease, so no other releases the
	// seat: the process records the closing itself, at its next renewal.
	if d := waitPresence(t, watch, commonv1.Side_SIDE_FIRST, false).Sub(restored); d > 3*time.Second {
		t.Fatalf("closing recorded %v after Redis came back", d)
	}
}

// storedPresence reads the seats' counts and holders from the stored state.
func storedPresence(t *testing.T, env *gametest.Env, id string) (conn [2]int, hold [2][]string) {
	t.Helper()
	raw, err := env.Redis.HGet(context.Background(), env.Config.KeyPrefix+"{g:"+id+"}", "s").Result()
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Conn [2]int      `json:"conn"`
		Hold [2][]string `json:"hold"`
	}
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatal(err)
	}
	return st.Conn, st.Hold
}

// TestPresenceIsRightAfterChurn: seat streams of both seats open and close
// at random on two processes, racing each other. Once they settle, the
// stored presence is what is open: the first seat held by the one process
// that still has a stream of it, the second by none.
func TestPresenceIsRightAfterChurn(t *testing.T) {
	prefix := redistest.Prefix(t)
	edit := func(c *game.Config) {
		c.KeyPrefix, c.SigningKeys, c.PresenceGrace = prefix, keyOne, 30*time.Millisecond
	}
	envs := []*gametest.Env{gametest.Start(t, edit), gametest.Start(t, edit)}
	tb := create(t, envs[0], &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI})
	sides := []commonv1.Side{commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range 15 {
				env := envs[rng.IntN(2)]
				ctx, cancel := context.WithCancel(tb.as(sides[rng.IntN(2)]))
				st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
				if err == nil {
					_, err = st.Recv()
				}
				if err != nil {
					t.Errorf("stream: %v", err)
				}
				time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
				cancel()
			}
		})
	}
	wg.Wait()
	ctx, cancel := context.WithCancel(tb.as(commonv1.Side_SIDE_FIRST))
	defer cancel()
	st, err := envs[1].Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, hold := storedPresence(t, envs[0], tb.id)
		if conn == [2]int{1, 0} && len(hold[0]) == 1 && len(hold[1]) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("presence %v held by %v, want the first seat held by one process", conn, hold)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStreamOfAnExpiredGameEnds: a game nobody plays expires (--live-ttl)
// even while a stream of it is open; the stream then ends with NotFound,
// as a new one would, instead of sending heartbeats of a game that is gone.
func TestStreamOfAnExpiredGameEnds(t *testing.T) {
	const liveTTL = 640 * time.Millisecond
	env := gametest.Start(t, func(c *game.Config) { c.LiveTTL = liveTTL })
	tb := xiangqi(t, env)
	g := tb.get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: g.GetVersion()})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := st.Recv()
		if status.Code(err) == codes.NotFound {
			break
		}
		if err != nil {
			t.Fatalf("stream of an expired game: %v, want NotFound", err)
		}
		if m.GetHeartbeat() == nil {
			t.Fatalf("unexpected message %v", m)
		}
	}
	if n := env.Redis.Exists(context.Background(), env.Config.KeyPrefix+"{g:"+tb.id+"}").Val(); n != 0 {
		t.Fatal("the stream ended while its game still exists")
	}
}

// TestStreamOfAGameFinishedElsewhereAndGone: a process whose last copy of
// a game is from before another process finished it does not take the
// game for kept: a finished game lives --retention, which can be shorter
// than --live-ttl. A stream asked for after that is NotFound at once.
func TestStreamOfAGameFinishedElsewhereAndGone(t *testing.T) {
	edit := func(c *game.Config) { c.Retention, c.SigningKeys, c.Heartbeat = time.Second, keyOne, time.Minute }
	a := gametest.Start(t, edit)
	b := gametest.Start(t, func(c *game.Config) { edit(c); c.KeyPrefix = a.Config.KeyPrefix })
	tb := create(t, a, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true})
	onB := &table{env: b, id: tb.id, seats: tb.seats}
	onB.move(t, "h3e3")
	if _, err := b.Client.Resign(onB.as(commonv1.Side_SIDE_SECOND), &gamev1.ResignRequest{GameId: tb.id, RequestId: rid()}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for a.Redis.Exists(context.Background(), a.Config.KeyPrefix+"{g:"+tb.id+"}").Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the finished game outlived its retention")
		}
		time.Sleep(100 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := a.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Fatalf("stream of a game gone after its retention: %v, want NotFound", err)
	}
}

// TestReconnectingDoesNotKeepAGameAlive: each stream of a seat opening
// and closing is a commit (the opponent sees it), but no play: an
// abandoned game expires (--live-ttl after its last move) however often a
// client reconnects to it.
func TestReconnectingDoesNotKeepAGameAlive(t *testing.T) {
	const liveTTL = 1280 * time.Millisecond
	env := gametest.Start(t, func(c *game.Config) { c.LiveTTL, c.PresenceGrace = liveTTL, 0 })
	tb := xiangqi(t, env)
	tb.move(t, "h3e3")
	moved := time.Now()
	for reconnects := 0; ; reconnects++ {
		if time.Since(moved) > 4*liveTTL {
			t.Fatalf("the game is still there %v after its last move, %d reconnections later", time.Since(moved), reconnects)
		}
		ctx, cancel := context.WithTimeout(tb.as(commonv1.Side_SIDE_SECOND), 5*time.Second)
		st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: 3})
		if err == nil {
			_, err = st.Recv()
		}
		cancel()
		if status.Code(err) == codes.NotFound {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestHeartbeatFindsACommitWhoseNotificationWasLost: a stream that hears
// nothing for an interval looks at the game's version before it sends a
// heartbeat, so an event whose notification never came (here: written
// straight to Redis, with none) is still delivered.
func TestHeartbeatFindsACommitWhoseNotificationWasLost(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := xiangqi(t, env)
	tb.move(t, "h3e3")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: 3})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || m.GetHeartbeat() == nil {
		t.Fatalf("first message %v (%v), want a heartbeat", m, err)
	}
	// The move's event again, as version 4, with no notification.
	key := env.Config.KeyPrefix + "{g:" + tb.id + "}"
	last, err := env.Redis.XRevRangeN(ctx, key+":e", "+", "-", 1).Result()
	if err != nil || len(last) != 1 {
		t.Fatalf("last event: %v %v", last, err)
	}
	var e gamev1.Event
	if err := proto.Unmarshal([]byte(last[0].Values["e"].(string)), &e); err != nil {
		t.Fatal(err)
	}
	// Unmarked, as events logged before commits marked them: a copy of
	// the marks of version 3's commit would say it follows another.
	e.Version = 4
	e.Commit = ""
	e.ProtoReflect().SetUnknown(nil)
	raw, err := proto.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Redis.XAdd(ctx, &redis.XAddArgs{Stream: key + ":e", ID: "4-1", Values: []any{"e", raw}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := env.Redis.HSet(ctx, key, "v", 4).Err(); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("waiting for version 4: %v", err)
		}
		if ev := m.GetEvent(); ev != nil {
			if ev.GetVersion() != 4 {
				t.Fatalf("event at version %d, want 4", ev.GetVersion())
			}
			return
		}
		if v := m.GetHeartbeat().GetVersion(); v != 3 {
			t.Fatalf("heartbeat at version %d before version 4 was sent", v)
		}
	}
}

// TestHeartbeatsKeepTimeWhileRedisIsSilent: the version a heartbeat
// reads (see TestStreamOfAnExpiredGameEnds) must not hold the heartbeat
// back when Redis takes seconds to answer, or a client would take a live
// connection for a dead one.
func TestHeartbeatsKeepTimeWhileRedisIsSilent(t *testing.T) {
	const heartbeat = time.Second
	toRedis := redistest.NewProxy(t, redistest.Addr(t))
	env := gametest.StartOn(t, toRedis.Addr(), func(c *game.Config) { c.Heartbeat = heartbeat })
	tb := xiangqi(t, env)
	g := tb.get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: g.GetVersion()})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || m.GetHeartbeat() == nil {
		t.Fatalf("first message %v (%v), want a heartbeat", m, err)
	}
	toRedis.Blackhole()
	defer toRedis.Restore()
	last := time.Now()
	for range 3 {
		m, err := st.Recv()
		if err != nil || m.GetHeartbeat() == nil {
			t.Fatalf("message %v (%v), want a heartbeat", m, err)
		}
		if gap := time.Since(last); gap > 2*heartbeat {
			t.Fatalf("a heartbeat %v after the last with Redis silent, on a %v interval", gap, heartbeat)
		}
		last = time.Now()
	}
}

// TestASeatStreamHearsWithinTheHeartbeatWhileRedisStalls: a seat's stream
// opened while Redis stalls hears within the heartbeat, as a spectator's
// does, though the seat's presence cannot be recorded meanwhile. The game
// is this process's own, so the stream opens from its cached state.
func TestASeatStreamHearsWithinTheHeartbeatWhileRedisStalls(t *testing.T) {
	const heartbeat = time.Second
	toRedis := redistest.NewProxy(t, redistest.Addr(t))
	env := gametest.StartOn(t, toRedis.Addr(), func(c *game.Config) { c.Heartbeat = heartbeat })
	tb := xiangqi(t, env)
	version := tb.move(t, "h3e3").GetGame().GetVersion() // the game is this process's own
	// Both streams' shards subscribed, and the seat's opening and closing
	// recorded, before Redis stalls.
	warm, cancelWarm := context.WithCancel(tb.as(commonv1.Side_SIDE_SECOND))
	if st, err := env.Client.StreamEvents(warm, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: version}); err == nil {
		_, _ = st.Recv()
	}
	cancelWarm()
	time.Sleep(500 * time.Millisecond)
	version = tb.get(t).GetVersion()

	firstMessage := func(ctx context.Context) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		start := time.Now()
		st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: version})
		if err != nil {
			return 0, err
		}
		_, err = st.Recv()
		return time.Since(start), err
	}

	toRedis.Hold()
	defer toRedis.Restore()
	spectator, err := firstMessage(context.Background())
	if err != nil {
		t.Fatalf("spectator stream: %v", err)
	}
	t.Logf("spectator stream: first message after %v", spectator)
	seat, err := firstMessage(tb.as(commonv1.Side_SIDE_FIRST))
	if err != nil {
		t.Fatalf("seat stream: %v", err)
	}
	if seat > 2*heartbeat {
		t.Fatalf("seat stream: first message after %v with Redis stalled, on a %v heartbeat (a spectator's stream of the same game: %v)", seat, heartbeat, spectator)
	}
}

// A seat of one game may watch another game that is public, as any
// spectator may: a client that sends its player's credential with every
// call can spectate too. The watcher holds no seat there. A private game
// stays closed to it.
func TestAnotherGamesSeatWatchesAPublicGame(t *testing.T) {
	env := gametest.Start(t, nil)
	public := xiangqi(t, env)
	private := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI})
	watcher := private.as(commonv1.Side_SIDE_FIRST)
	if _, err := env.Client.GetGame(watcher, &gamev1.GetGameRequest{GameId: public.id}); err != nil {
		t.Fatalf("read of a public game with another game's seat: %v", err)
	}
	st, err := env.Client.StreamEvents(watcher, &gamev1.StreamEventsRequest{GameId: public.id, Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("stream of a public game with another game's seat: %v", err)
	}
	public.move(t, "h3e3")
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.GetEvent().GetMovePlayed() != nil {
			break
		}
	}
	if got := heldSeats(t, env); len(got) != 0 {
		t.Fatalf("a watcher with another game's seat holds %v", got)
	}
	_, err = env.Client.GetGame(public.as(commonv1.Side_SIDE_FIRST), &gamev1.GetGameRequest{GameId: private.id})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), "not for a seat of game "+private.id) {
		t.Fatalf("read of a private game with another game's seat: %v, want PermissionDenied naming the game", err)
	}
}

// TestAPlayersCredentialWatchesAPublicGame: apps send their player's
// credential (from matchmaking) with every call. On a public game it holds
// no seat and watches, as no credential does; a private game refuses it,
// saying what it is. Alike whether matchmaking signs it with keys the game
// service does not hold or with the seat keys themselves (the deployment
// files ship one key for both): then it was refused PermissionDenied, "not
// for a seat of game X", as another game's seat is.
func TestAPlayersCredentialWatchesAPublicGame(t *testing.T) {
	const sharedKeys = "k1:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	for name, keys := range map[string]string{"signed with other keys": "", "signed with the seat keys": sharedKeys} {
		t.Run(name, func(t *testing.T) {
			env := gametest.Start(t, func(c *game.Config) {
				if keys != "" {
					c.SigningKeys = keys
				}
			})
			public := xiangqi(t, env)
			private := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI})
			matchmaking, _, err := auth.KeyringFromConfig(keys)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			tok, err := matchmaking.Sign(auth.Claims{Kind: auth.KindGuest, Subject: "guest-0123456789abcdef01234567", Name: "Guest", IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix()})
			if err != nil {
				t.Fatal(err)
			}
			player := gametest.As(context.Background(), tok)
			if _, err := env.Client.GetGame(player, &gamev1.GetGameRequest{GameId: public.id}); err != nil {
				t.Fatalf("read of a public game with a player's credential: %v", err)
			}
			st, err := env.Client.StreamEvents(player, &gamev1.StreamEventsRequest{GameId: public.id, Snapshot: true})
			if err != nil {
				t.Fatal(err)
			}
			if m, err := st.Recv(); err != nil || m.GetSnapshot() == nil {
				t.Fatalf("stream of a public game with a player's credential: %v, %v", m, err)
			}
			if got := heldSeats(t, env); len(got) != 0 {
				t.Fatalf("a watcher with a player's credential holds %v", got)
			}
			_, err = env.Client.GetGame(player, &gamev1.GetGameRequest{GameId: private.id})
			if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), "guest player's credential") {
				t.Fatalf("read of a private game with a player's credential: %v, want Unauthenticated saying what it is", err)
			}
			// Nor does it act for a seat.
			_, err = env.Client.MakeMove(player, &gamev1.MakeMoveRequest{GameId: public.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h3e3"}})
			if status.Code(err) != codes.Unauthenticated {
				t.Fatalf("a move with a player's credential: %v, want Unauthenticated", err)
			}
		})
	}
}

// A seat connecting adds an event, and so a version, but changes nothing a
// client decides its move on: a move that expects the version its client
// read before still goes through. A draw offer in between does make that
// version stale.
func TestPresenceLeavesTheExpectedVersionCurrent(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := xiangqi(t, env)
	red, black := commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND
	read := tb.get(t).GetVersion()
	watch, err := env.Client.StreamEvents(context.Background(), &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(tb.as(black))
	defer cancel()
	if _, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id}); err != nil {
		t.Fatal(err)
	}
	waitPresence(t, watch, black, true)
	if v := tb.get(t).GetVersion(); v == read {
		t.Fatalf("Black's connection added no version (still %d)", v)
	}
	if _, err := env.Client.MakeMove(tb.as(red), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), ExpectedVersion: read, Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatalf("a move expecting the version read before Black connected: %v", err)
	}
	read = tb.get(t).GetVersion()
	if _, err := env.Client.OfferDraw(tb.as(red), &gamev1.OfferDrawRequest{GameId: tb.id, RequestId: rid()}); err != nil {
		t.Fatal(err)
	}
	_, err = env.Client.MakeMove(tb.as(black), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), ExpectedVersion: read, Move: &commonv1.Move{Coordinate: "h10g8"}})
	if status.Code(err) != codes.Aborted {
		t.Fatalf("a move expecting the version before a draw offer: %v, want Aborted", err)
	}
}

// TestStaleVersionCarriesTheCurrentVersion: a refused expected_version
// names the game's current version in an ErrorInfo detail, so a client
// resumes from it without parsing the message.
func TestStaleVersionCarriesTheCurrentVersion(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := xiangqi(t, env)
	tb.move(t, "h3e3")
	current := tb.get(t).GetVersion()
	for _, expected := range []uint64{1, current + 5} {
		_, err := env.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), ExpectedVersion: expected, Move: &commonv1.Move{Coordinate: "h10g8"}})
		st := status.Convert(err)
		if st.Code() != codes.Aborted {
			t.Fatalf("expected_version %d: %v, want Aborted", expected, err)
		}
		var info *errdetails.ErrorInfo
		for _, d := range st.Details() {
			if i, ok := d.(*errdetails.ErrorInfo); ok {
				info = i
			}
		}
		want := fmt.Sprint(current)
		if info == nil || info.GetReason() != "STALE_VERSION" || info.GetDomain() != "palace" || info.GetMetadata()["current_version"] != want || info.GetMetadata()["expected_version"] != fmt.Sprint(expected) {
			t.Fatalf("expected_version %d: details %v, want STALE_VERSION with current_version %s", expected, st.Details(), want)
		}
	}
}

// A large read is sent gzip-compressed to a gRPC client that accepts gzip
// (grpc-go's clients accept what they have registered); a small one is
// sent as it is.
func TestLargeReadsAreCompressed(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := xiangqi(t, env)
	// The encoding of an answer shows only to a stats handler: grpc-go
	// keeps its own headers from the metadata it hands on.
	seen := &answerEncoding{}
	cc, err := grpc.NewClient(env.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithStatsHandler(seen))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := gamev1.NewGameServiceClient(cc)
	encoding := func() string {
		t.Helper()
		if _, err := client.GetGame(context.Background(), &gamev1.GetGameRequest{GameId: tb.id}); err != nil {
			t.Fatal(err)
		}
		return seen.last.Load().(string)
	}
	if got := encoding(); got != "" {
		t.Fatalf("a new game's read is sent with encoding %q, want none", got)
	}
	for range 30 {
		tb.move(t, tb.get(t).GetLegalMoves()[0].GetCoordinate())
	}
	if got := encoding(); got != "gzip" {
		t.Fatalf("a long game's read is sent with encoding %q, want gzip", got)
	}
}

// answerEncoding remembers the encoding of the last answer a client got.
type answerEncoding struct{ last atomic.Value }

func (a *answerEncoding) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (a *answerEncoding) HandleRPC(_ context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.InHeader); ok && h.Client {
		a.last.Store(h.Compression)
	}
}
func (a *answerEncoding) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (a *answerEncoding) HandleConn(context.Context, stats.ConnStats) {}

// snapshotOpener opens a stream of tb's game with ctx's credential, if
// any, and reads its snapshot.
func snapshotOpener(env *gametest.Env, tb *table) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
}

// TestMaxStreamsFlagBoundsStreams: --max-streams (or PALACE_MAX_STREAMS)
// reaches the handler: with 1, a second stream is refused with
// ResourceExhausted while the first is open, and admitted once it ends.
func TestMaxStreamsFlagBoundsStreams(t *testing.T) {
	t.Setenv("PALACE_MAX_STREAMS", "7")
	var fromEnv game.Config
	fs := flag.NewFlagSet("gamed", flag.ContinueOnError)
	fromEnv.RegisterFlags(fs)
	if fromEnv.MaxStreams != 7 {
		t.Fatalf("PALACE_MAX_STREAMS=7 gives %d streams", fromEnv.MaxStreams)
	}
	var parsed game.Config
	fs = flag.NewFlagSet("gamed", flag.ContinueOnError)
	parsed.RegisterFlags(fs)
	if err := fs.Parse([]string{"--max-streams", "1"}); err != nil {
		t.Fatal(err)
	}
	if err := parsed.Validate(); err != nil {
		t.Fatal(err)
	}
	zero := game.DefaultConfig()
	zero.MaxStreams = 0
	if err := zero.Validate(); err == nil || !strings.Contains(err.Error(), "--max-streams") {
		t.Fatalf("Validate() with no streams = %v, want an error naming --max-streams", err)
	}
	shares := game.DefaultConfig()
	shares.MaxStreams, shares.MaxSpectatorStreams, shares.MaxSeatStreams = 10, 11, 0
	if err := shares.Validate(); err == nil || !strings.Contains(err.Error(), "--max-spectator-streams 11: want 0") || !strings.Contains(err.Error(), "--max-seat-streams must be at least 1") {
		t.Fatalf("Validate() with more spectators than streams and no seat streams = %v", err)
	}
	env := gametest.Start(t, func(c *game.Config) { c.MaxStreams = parsed.MaxStreams })
	tb := xiangqi(t, env)
	open := snapshotOpener(env, tb)
	first, cancel := context.WithCancel(context.Background())
	if err := open(first); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	err := open(t.Context())
	wantCode(t, err, codes.ResourceExhausted)
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for err = open(t.Context()); status.Code(err) == codes.ResourceExhausted && time.Now().Before(deadline); err = open(t.Context()) {
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("a stream after the first ended: %v", err)
	}
}

// TestSpectatorsLeaveRoomForSeats: streams without a seat credential hold
// at most --max-spectator-streams of --max-streams, so a seat's own stream
// is admitted however many spectators came first.
func TestSpectatorsLeaveRoomForSeats(t *testing.T) {
	env := gametest.Start(t, func(c *game.Config) { c.MaxStreams, c.MaxSpectatorStreams, c.MaxSeatStreams = 3, 2, 1 })
	tb := xiangqi(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := snapshotOpener(env, tb)
	for i := range 2 {
		if err := open(ctx); err != nil {
			t.Fatalf("spectator %d: %v", i, err)
		}
	}
	err := open(ctx)
	wantCode(t, err, codes.ResourceExhausted)
	if !strings.Contains(err.Error(), "spectator streams") {
		t.Errorf("the third spectator is told %q", err)
	}
	if err := open(gametest.As(ctx, tb.seats[commonv1.Side_SIDE_FIRST])); err != nil {
		t.Fatalf("a seat's stream beside two spectators: %v", err)
	}
	if err := open(gametest.As(ctx, tb.seats[commonv1.Side_SIDE_SECOND])); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a stream beyond --max-streams: %v, want ResourceExhausted", err)
	}
	// The first seat reconnects to the full server: its new stream takes
	// the place of the one it left behind.
	if err := open(gametest.As(ctx, tb.seats[commonv1.Side_SIDE_FIRST])); err != nil {
		t.Fatalf("a seat's new stream on a full server, replacing its old one: %v", err)
	}
}

// TestASeatKeepsItsNewestStreams: a seat holds at most --max-seat-streams
// streams in a process; a newer one ends its oldest, not the other seat's,
// and the newer ones go on getting events.
func TestASeatKeepsItsNewestStreams(t *testing.T) {
	env := gametest.Start(t, func(c *game.Config) { c.MaxSeatStreams = 2 })
	tb := xiangqi(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func(side commonv1.Side) gamev1.GameService_StreamEventsClient {
		t.Helper()
		st, err := env.Client.StreamEvents(gametest.As(ctx, tb.seats[side]), &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
		if err == nil {
			_, err = st.Recv()
		}
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	other := open(commonv1.Side_SIDE_SECOND)
	oldest := open(commonv1.Side_SIDE_FIRST)
	newer := []gamev1.GameService_StreamEventsClient{open(commonv1.Side_SIDE_FIRST), open(commonv1.Side_SIDE_FIRST), other}
	for {
		m, err := oldest.Recv()
		if err != nil {
			wantCode(t, err, codes.ResourceExhausted)
			if !strings.Contains(err.Error(), "its oldest, this one, is closed") || apierr.ReasonOf(err) != newest.ReplacedReason {
				t.Errorf("the oldest stream is told %q, reason %q", err, apierr.ReasonOf(err))
			}
			break
		}
		if m.GetEvent() == nil && m.GetHeartbeat() == nil {
			t.Fatalf("the oldest stream got %v", m)
		}
	}
	version := tb.move(t, "h3e3").GetGame().GetVersion()
	for i, st := range newer {
		for {
			m, err := st.Recv()
			if err != nil {
				t.Fatalf("stream %d ended: %v", i, err)
			}
			if m.GetEvent().GetVersion() == version {
				break
			}
		}
	}
}

// TestAStreamOpensAtOnce: a stream with nothing to send yet (a spectator's,
// which announces no presence, resumed at the game's version) sends a
// heartbeat at once, over gRPC and Connect, so a client knows it is live
// before the first interval's heartbeat, here a minute away.
func TestAStreamOpensAtOnce(t *testing.T) {
	env := gametest.Start(t, func(c *game.Config) { c.Heartbeat = time.Minute })
	tb := xiangqi(t, env)
	version := tb.move(t, "h3e3").GetGame().GetVersion()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.Recv()
	if err != nil || m.GetHeartbeat().GetVersion() != version {
		t.Fatalf("gRPC: %v, %v; want a heartbeat at version %d before the interval's", m, err, version)
	}

	body, _ := json.Marshal(map[string]any{"gameId": tb.id, "afterVersion": version})
	frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(body)))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+env.Addr+"/palace.game.v1.GameService/StreamEvents", bytes.NewReader(append(frame, body...)))
	req.Header.Set("Content-Type", "application/connect+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("Connect: no answer before the first heartbeat: %v", err)
	}
	defer resp.Body.Close()
	var head [5]byte
	if _, err := io.ReadFull(resp.Body, head[:]); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("Connect: status %d, %v; want a message before the first heartbeat", resp.StatusCode, err)
	}
	msg := make([]byte, binary.BigEndian.Uint32(head[1:]))
	if _, err := io.ReadFull(resp.Body, msg); err != nil || !strings.Contains(string(msg), `"heartbeat"`) {
		t.Fatalf("Connect: %s, %v; want a heartbeat", msg, err)
	}
}

// streamEnd reads st until it ends, and returns how.
func streamEnd(t *testing.T, st grpc.ServerStreamingClient[gamev1.StreamEventsResponse], within time.Duration) error {
	t.Helper()
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	select {
	case err := <-ended:
		return err
	case <-time.After(within):
		t.Fatalf("the stream did not end within %v", within)
		return nil
	}
}

// TestAStreamWhoseGameLostItsLogEnds: a game whose event log is gone
// while its state stays (a Redis that evicts keys) cannot be streamed:
// the stream must end with a status, not send heartbeats for ever.
func TestAStreamWhoseGameLostItsLogEnds(t *testing.T) {
	env := gametest.Start(t, func(c *game.Config) { c.Heartbeat = 200 * time.Millisecond })
	tb := xiangqi(t, env)
	tb.move(t, "h3e3")
	tb.move(t, "h10g8")
	if err := env.Redis.Del(context.Background(), env.Config.KeyPrefix+"{g:"+tb.id+"}:e").Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	if err := streamEnd(t, st, 5*time.Second); status.Code(err) != codes.Internal {
		t.Fatalf("the stream of a game without its log ended with %v, want Internal", err)
	}
}

// TestAStreamOfAGameCreatedAgainEnds: a game expired, and the same
// creation, sent again, made a new game under its id. A stream of the
// first must not carry on with the second's events as if they were its
// own.
func TestAStreamOfAGameCreatedAgainEnds(t *testing.T) {
	a := gametest.Start(t, func(c *game.Config) { c.Heartbeat = time.Second })
	b := gametest.Start(t, func(c *game.Config) { c.KeyPrefix, c.SigningKeys = a.Config.KeyPrefix, a.Config.SigningKeys })
	req := &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true, Seats: seats()}
	tb := create(t, a, req)
	for _, mv := range []string{"h3e3", "h10g8", "b1c3", "b10c8"} {
		tb.move(t, mv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := a.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || m.GetSnapshot() == nil {
		t.Fatalf("first message %v (%v), want the snapshot", m, err)
	}
	// A heartbeat starts a look at the game: the game goes and comes back
	// between two looks, as an expiry and a creation sent again may.
	if m, err := st.Recv(); err != nil || m.GetHeartbeat() == nil {
		t.Fatalf("second message %v (%v), want a heartbeat", m, err)
	}
	time.Sleep(100 * time.Millisecond)
	p := a.Config.KeyPrefix + "{g:" + tb.id + "}"
	if err := a.Redis.Del(context.Background(), p, p+":e", p+":m").Err(); err != nil {
		t.Fatal(err)
	}
	again := create(t, b, req)
	if again.id != tb.id {
		t.Fatalf("created again as %s, want the id %s", again.id, tb.id)
	}
	again.move(t, "h3e3")
	if err := streamEnd(t, st, 5*time.Second); status.Code(err) != codes.OutOfRange {
		t.Fatalf("the stream of the first game ended with %v, want OutOfRange", err)
	}
}

// TestAHealthyStreamIsNeverTakenForBehind: a stream looks at its game's
// version after each silence; a move sent to it while the look is under
// way must not make the game seem behind the stream.
func TestAHealthyStreamIsNeverTakenForBehind(t *testing.T) {
	env := gametest.Start(t, func(c *game.Config) { c.Heartbeat = 2 * time.Millisecond })
	moves := []string{"h3e3", "h10g8", "h1g3", "i10h10", "i1h1", "b10c8", "b1c3", "a10b10", "a1b1", "c7c6", "c4c5", "g7g6", "g4g5"}
	rng := rand.New(rand.NewPCG(7, 8))
	const streams = 8 // each a chance for the race
	for round := range 30 {
		tb := xiangqi(t, env)
		ctx, cancel := context.WithCancel(context.Background())
		ended := make(chan error, streams)
		for range streams {
			st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for {
					if _, err := st.Recv(); err != nil {
						ended <- err
						return
					}
				}
			}()
		}
		for _, mv := range moves {
			time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
			tb.move(t, mv)
		}
		time.Sleep(20 * time.Millisecond)
		select {
		case err := <-ended:
			t.Fatalf("round %d: a healthy stream ended: %v", round, err)
		default:
		}
		cancel()
	}
}

// TestHeartbeatsOfStreamsOpenedTogetherDrift: streams opened at the same
// moment (clients reconnecting after a rollout) do not beat in step, as
// each beat reads the game from Redis: their intervals differ, none
// longer than --heartbeat.
func TestHeartbeatsOfStreamsOpenedTogetherDrift(t *testing.T) {
	const heartbeat = 400 * time.Millisecond
	env := gametest.Start(t, func(c *game.Config) { c.Heartbeat = heartbeat })
	tb := xiangqi(t, env)
	version := tb.get(t).GetVersion()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const streams = 30
	intervals := make([]time.Duration, streams)
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := range streams {
		wg.Go(func() {
			// Resumed at the game's version: a heartbeat at once, then one
			// after each interval.
			st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: version})
			if err != nil {
				errs <- err
				return
			}
			var at []time.Time
			for len(at) < 2 {
				m, err := st.Recv()
				if err != nil {
					errs <- err
					return
				}
				if m.GetHeartbeat() == nil {
					errs <- fmt.Errorf("stream %d sent %v; want heartbeats only", i, m)
					return
				}
				at = append(at, time.Now())
			}
			intervals[i] = at[1].Sub(at[0])
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if spread := slices.Max(intervals) - slices.Min(intervals); spread < heartbeat/10 {
		t.Fatalf("heartbeat intervals of %d streams opened together lie within %v of each other (%v): they beat in step", streams, spread, intervals)
	}
}

// TestAStreamOverAGapInItsLogEnds: a log that lacks a version in its
// middle (damaged: commits write it in order) cannot be streamed past the
// gap; the stream must end with a status rather than read the same log
// again and again.
func TestAStreamOverAGapInItsLogEnds(t *testing.T) {
	env := gametest.Start(t, func(c *game.Config) { c.Heartbeat = time.Minute })
	tb := xiangqi(t, env)
	tb.move(t, "h3e3")
	tb.move(t, "h10g8")
	tb.move(t, "b1c3")
	key := env.Config.KeyPrefix + "{g:" + tb.id + "}:e"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	log, err := env.Redis.XRange(ctx, key, "-", "+").Result()
	if err != nil || len(log) < 3 {
		t.Fatalf("the log: %v %v", log, err)
	}
	if err := env.Redis.XDel(ctx, key, log[1].ID).Err(); err != nil {
		t.Fatal(err)
	}
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	if err := streamEnd(t, st, 5*time.Second); status.Code(err) != codes.Internal {
		t.Fatalf("the stream over a gap in its log ended with %v, want Internal", err)
	}
}

// TestAClientReconnectingToAnotherProcessEachTimeCommitsFewEvents: the
// hold that doubles with a seat's recent closings lives in each process,
// so a client whose reconnections landed on another process each time (a
// balancer spreading streams) was never held longer: the new process
// recorded its holding and the old one, once its hold ran, its letting
// go, two events per reconnection (40 in 20 reconnections here). A change
// of which processes hold a connected seat now commits no event.
func TestAClientReconnectingToAnotherProcessEachTimeCommitsFewEvents(t *testing.T) {
	const grace = 10 * time.Millisecond // longest hold: 64 graces, 640 ms
	const session = 250 * time.Millisecond
	first := gametest.Start(t, func(c *game.Config) { c.PresenceGrace = grace })
	envs := []*gametest.Env{first}
	for range 2 {
		envs = append(envs, gametest.Start(t, func(c *game.Config) {
			c.PresenceGrace, c.KeyPrefix, c.SigningKeys = grace, first.Config.KeyPrefix, first.Config.SigningKeys
		}))
	}
	tb := create(t, first, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI})
	before := tb.get(t).GetVersion()
	start := time.Now()
	reconnections := 0
	for i := 0; time.Since(start) < 5*time.Second; i++ {
		env := envs[i%len(envs)]
		ctx, cancel := context.WithCancel(tb.as(commonv1.Side_SIDE_SECOND))
		st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil { // the snapshot: the stream is open
			t.Fatal(err)
		}
		time.Sleep(session)
		cancel()
		reconnections++
	}
	elapsed := time.Since(start)
	time.Sleep(64*grace + 200*time.Millisecond) // the last hold runs
	grew := tb.get(t).GetVersion() - before
	// Two events per longest hold, and the first few doublings
	// (1+2+...+32 graces), plus slack: the bound of one process.
	bound := uint64(2*elapsed/(64*grace)) + 2*6 + 2
	if grew > bound {
		t.Fatalf("%d reconnections across replicas in %v committed %d events to the game's log, more than the bound of %d (2 per 64 graces) of a client reconnecting to one process", reconnections, elapsed.Round(time.Millisecond), grew, bound)
	}
}

// TestRefusedSpectatorsLeaveTheSeatsRoom: spectators get only
// --max-spectator-streams of --max-streams, "so that however many of them
// come, the players' own streams find room". Here the spectators' share is
// full (one open spectator) and one place is left for seats. Spectators
// that keep knocking, each refused ResourceExhausted, made a seat's stream
// refused now and then (5 or 6 of 500): a spectator took a place of
// --max-streams before it looked at its share, and held the seats' last
// place for a moment while refused.
func TestRefusedSpectatorsLeaveTheSeatsRoom(t *testing.T) {
	env := gametest.Start(t, func(c *game.Config) { c.MaxStreams, c.MaxSpectatorStreams = 2, 1 })
	tb := xiangqi(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open := snapshotOpener(env, tb)
	// The one spectator the share allows.
	specCtx, specCancel := context.WithCancel(ctx)
	defer specCancel()
	if err := open(specCtx); err != nil {
		t.Fatalf("first spectator: %v", err)
	}
	var firstRefusal string
	seatTrials := func(n int) (refused int) {
		for i := range n {
			side := commonv1.Side_SIDE_FIRST
			if i%2 == 1 {
				side = commonv1.Side_SIDE_SECOND
			}
			sctx, scancel := context.WithCancel(gametest.As(ctx, tb.seats[side]))
			err := open(sctx)
			scancel()
			switch {
			case status.Code(err) == codes.ResourceExhausted:
				refused++
				if firstRefusal == "" {
					firstRefusal = status.Convert(err).Message()
				}
			case err != nil:
				t.Fatalf("seat stream: %v", err)
			}
			// Wait for the seat's stream to leave its place.
			for deadline := time.Now().Add(5 * time.Second); openStreams(t, env) != 1; {
				if time.Now().After(deadline) {
					t.Fatalf("streams still open: %d", openStreams(t, env))
				}
				time.Sleep(2 * time.Millisecond)
			}
			time.Sleep(3 * time.Millisecond)
		}
		return refused
	}
	if r := seatTrials(30); r != 0 {
		t.Fatalf("control: %d of 30 seat streams refused with no spectator knocking", r)
	}
	var wg sync.WaitGroup
	var knocks, refusedSpectators atomic.Int64
	floodCtx, stopFlood := context.WithCancel(ctx)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for floodCtx.Err() == nil {
				err := open(floodCtx)
				knocks.Add(1)
				if status.Code(err) == codes.ResourceExhausted {
					refusedSpectators.Add(1)
				}
			}
		}()
	}
	const trials = 500
	refused := seatTrials(trials)
	stopFlood()
	wg.Wait()
	t.Logf("%d spectator opens (%d refused) during %d seat opens", knocks.Load(), refusedSpectators.Load(), trials)
	if refused > 0 {
		t.Fatalf("%d of %d seat streams refused ResourceExhausted while refused spectators knocked (the spectators' share was full, one place left for seats): %q", refused, trials, firstRefusal)
	}
}
