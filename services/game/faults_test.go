package game_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/deadline"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

// TestStreamCatchesUpAfterLosingRedis: the process serving a stream loses
// Redis (every connection, its subscription with them) while another
// process commits a move, whose notification it therefore never gets.
// Once Redis is back, the stream must deliver that move without waiting
// for another event, then the next one, each exactly once and in order.
func TestStreamCatchesUpAfterLosingRedis(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	a := gametest.StartOn(t, proxy.Addr(), func(c *game.Config) { c.SigningKeys = keyOne })
	b := gametest.Start(t, func(c *game.Config) { c.KeyPrefix = a.Config.KeyPrefix; c.SigningKeys = keyOne })
	tb := xiangqi(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A spectator's stream on a: it records no presence, so a commits
	// nothing of its own.
	st, err := a.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	next := func(what string) *gamev1.Event {
		t.Helper()
		for {
			m, err := st.Recv()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if e := m.GetEvent(); e != nil {
				if e.GetVersion() != last+1 {
					t.Fatalf("%s: version %d after %d", what, e.GetVersion(), last)
				}
				last = e.GetVersion()
				return e
			}
		}
	}
	for last < tb.get(t).GetVersion() {
		next("events before the cut")
	}

	proxy.Cut()
	first := tb.move(t, "h3e3").GetGame().GetVersion()
	// Long enough for a's subscription to have noticed and to be retrying.
	time.Sleep(300 * time.Millisecond)
	proxy.Restore()

	e := next("the move committed while Redis was away")
	if e.GetVersion() != first || e.GetMovePlayed().GetMove().GetCoordinate() != "h3e3" {
		t.Fatalf("got %v, want h3e3 at version %d", e, first)
	}
	second := tb.move(t, "h10g8").GetGame().GetVersion()
	e = next("the move after Redis came back")
	if e.GetVersion() != second || e.GetMovePlayed().GetMove().GetCoordinate() != "h10g8" {
		t.Fatalf("got %v, want h10g8 at version %d", e, second)
	}
}

// TestMoveWhoseCommitAnswerIsLost: Redis applies a move's commit but its
// answer never reaches the service, so the client's call fails without
// knowing whether the move was played. The client's retry with the same
// request id, on another process or on the same one once it has Redis
// again, must get the move as it was applied, the same answer both times,
// and not play it a second time.
func TestMoveWhoseCommitAnswerIsLost(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	a := gametest.StartOn(t, proxy.Addr(), func(c *game.Config) { c.SigningKeys = keyOne })
	b := gametest.Start(t, func(c *game.Config) { c.KeyPrefix = a.Config.KeyPrefix; c.SigningKeys = keyOne })
	tb := xiangqi(t, a)
	before := tb.get(t).GetVersion()
	req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h3e3"}}

	proxy.Blackhole()
	ctx, cancel := context.WithTimeout(tb.as(commonv1.Side_SIDE_FIRST), time.Second)
	_, err := a.Client.MakeMove(ctx, req)
	cancel()
	if err == nil {
		t.Fatal("a move was answered while Redis' answers were lost")
	}
	// The commit itself reached Redis: b, which has Redis, sees the move.
	seen := &table{env: b, id: tb.id, seats: tb.seats}
	for deadline := time.Now().Add(10 * time.Second); seen.get(t).GetVersion() == before; {
		if time.Now().After(deadline) {
			t.Fatal("the commit never reached Redis: the answer was not what was lost")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A client whose process is gone retries on another one...
	ctx, cancel = context.WithTimeout(tb.as(commonv1.Side_SIDE_FIRST), 30*time.Second)
	defer cancel()
	elsewhere, err := b.Client.MakeMove(ctx, req)
	if err != nil {
		t.Fatalf("retry on another process: %v", err)
	}
	// ...or on the same one, once it has Redis again.
	proxy.Restore()
	resp, err := a.Client.MakeMove(ctx, req)
	if err != nil {
		t.Fatalf("retry with the same request id: %v", err)
	}
	if resp.GetGame().GetVersion() != before+1 || resp.GetMove().GetMove().GetCoordinate() != "h3e3" {
		t.Fatalf("retry answered version %d move %v, want h3e3 at version %d", resp.GetGame().GetVersion(), resp.GetMove(), before+1)
	}
	if !proto.Equal(resp, elsewhere) {
		t.Fatalf("the two retries differ:\n%v\n%v", resp, elsewhere)
	}
	g := seen.get(t)
	if g.GetVersion() != before+1 || len(g.GetMoves()) != 1 {
		t.Fatalf("the game is at version %d with %d moves, want version %d with 1", g.GetVersion(), len(g.GetMoves()), before+1)
	}
	tb.move(t, "h10g8")
}

// TestARetryAfterALostAnswerWritesNothingAhead: in a game against the
// AI, Redis applies Red's move (its AI job went ahead of it) but the
// answer is lost. The retry on the same process must find its first
// answer before writing anything: not a second AI job for the position.
func TestARetryAfterALostAnswerWritesNothingAhead(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	a := gametest.StartOn(t, proxy.Addr(), func(c *game.Config) { c.SigningKeys = keyOne })
	b := gametest.Start(t, func(c *game.Config) { c.KeyPrefix = a.Config.KeyPrefix; c.SigningKeys = keyOne })
	tb := create(t, a, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(0, 3)})
	tb.move(t, "h3e3")
	tb.move(t, "h10g8") // the AI's reply, with its seat's credential: a holds the game
	before := tb.get(t).GetVersion()
	req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "c4c5"}}
	of := func(cmd string) func([]byte) bool {
		return func(held []byte) bool {
			held = bytes.ToLower(held)
			return bytes.Contains(held, []byte(cmd)) && bytes.Contains(held, []byte(strings.ToLower(tb.id)))
		}
	}
	waitHeld := func(cmd string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !proxy.Holds(of(cmd)); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s held", cmd)
			}
		}
	}
	proxy.Hold()
	defer proxy.Restore()
	lost := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(tb.as(commonv1.Side_SIDE_FIRST), 3*time.Second)
		defer cancel()
		_, err := a.Client.MakeMove(ctx, req)
		lost <- err
	}()
	waitHeld("xadd") // the AI's job, ahead of the commit
	proxy.Pass(of("xadd"))
	waitHeld("evalsha")
	proxy.Blackhole()
	proxy.Pass(of("evalsha"))
	if err := <-lost; err == nil {
		t.Fatal("a move was answered while Redis' answers were lost")
	}
	seen := &table{env: b, id: tb.id, seats: tb.seats}
	if v := seen.get(t).GetVersion(); v != before+1 {
		t.Fatalf("the game is at version %d, want %d: the commit did not reach Redis", v, before+1)
	}
	state := redisState(t, b, tb.id)
	proxy.Restore()
	var resp *gamev1.MakeMoveResponse
	retrying(t, "the retry", func() (err error) {
		resp, err = a.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), req)
		return err
	})
	if resp.GetGame().GetVersion() != before+1 || resp.GetMove().GetMove().GetCoordinate() != "c4c5" {
		t.Fatalf("the retry answered version %d, move %v; want c4c5 at version %d", resp.GetGame().GetVersion(), resp.GetMove(), before+1)
	}
	if after := redisState(t, b, tb.id); after != state {
		t.Fatalf("the retry changed Redis:\nbefore %s\nafter  %s", state, after)
	}
}

// TestCommandsWhileRedisIsDown: with Redis out of reach a command fails
// with Unavailable (retry), not Internal (a bug), and a read too; once
// Redis is back the same request is applied, once.
func TestCommandsWhileRedisIsDown(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	a := gametest.StartOn(t, proxy.Addr(), nil)
	tb := xiangqi(t, a)
	before := tb.get(t).GetVersion()
	req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h3e3"}}

	proxy.Cut()
	ctx, cancel := context.WithTimeout(tb.as(commonv1.Side_SIDE_FIRST), 20*time.Second)
	defer cancel()
	_, err := a.Client.MakeMove(ctx, req)
	wantCode(t, err, codes.Unavailable)
	_, err = a.Client.GetGame(ctx, &gamev1.GetGameRequest{GameId: tb.id})
	wantCode(t, err, codes.Unavailable)
	proxy.Restore()

	resp, err := a.Client.MakeMove(ctx, req)
	if err != nil {
		t.Fatalf("the same request once Redis is back: %v", err)
	}
	if resp.GetGame().GetVersion() != before+1 {
		t.Fatalf("version %d, want %d", resp.GetGame().GetVersion(), before+1)
	}
}

// retrying calls f until it returns anything but Unavailable, as a client
// does while the service cannot reach Redis.
func retrying(t testing.TB, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := f()
		if status.Code(err) != codes.Unavailable {
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still unavailable after 20s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGamesSurviveARedisCrash: Redis is killed (SIGKILL) in the middle of
// a game and started again from its append-only file. Every acknowledged
// move is still there, the game goes on to its end, and a reader that
// follows it throughout (resuming from its last version if its stream
// breaks) gets every version exactly once, in order.
func TestGamesSurviveARedisCrash(t *testing.T) {
	srv := redistest.Own(t)
	env := gametest.StartOn(t, srv.Addr, nil)
	tb := xiangqi(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	seen := make(chan []uint64, 1)
	go func() {
		var got []uint64
		defer func() { seen <- got }()
		var last uint64
		for ctx.Err() == nil {
			st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: last})
			for err == nil {
				var m *gamev1.StreamEventsResponse
				if m, err = st.Recv(); err == nil && m.GetEvent() != nil {
					last = m.GetEvent().GetVersion()
					got = append(got, last)
					if m.GetEvent().GetGameEnded() != nil {
						return
					}
				}
			}
			if status.Code(err) != codes.Unavailable {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	rng := rand.New(rand.NewPCG(5, 6))
	var acked []string
	play := func(n int) {
		for range n {
			var g *gamev1.Game
			retrying(t, "read", func() error {
				r, err := env.Client.GetGame(ctx, &gamev1.GetGameRequest{GameId: tb.id})
				g = r.GetGame()
				return err
			})
			legal := g.GetLegalMoves()
			req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: legal[rng.IntN(len(legal))]}
			retrying(t, "move", func() error {
				r, err := env.Client.MakeMove(tb.as(g.GetTurn()), req)
				if err == nil {
					acked = append(acked, r.GetMove().GetMove().GetCoordinate())
				}
				return err
			})
		}
	}
	play(10)
	if err := srv.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	play(10)
	retrying(t, "resign", func() error {
		_, err := env.Client.Resign(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.ResignRequest{GameId: tb.id, RequestId: "resign"})
		return err
	})

	var final *gamev1.Game
	retrying(t, "final read", func() error {
		r, err := env.Client.GetGame(ctx, &gamev1.GetGameRequest{GameId: tb.id})
		final = r.GetGame()
		return err
	})
	var stored []string
	for _, m := range final.GetMoves() {
		stored = append(stored, m.GetMove().GetCoordinate())
	}
	if !slices.Equal(stored, acked) {
		t.Fatalf("stored moves %v, acknowledged %v", stored, acked)
	}
	got := <-seen
	for i, v := range got {
		if v != uint64(i+1) {
			t.Fatalf("the reader got versions %v: want 1..%d, each once", got, final.GetVersion())
		}
	}
	if uint64(len(got)) != final.GetVersion() {
		t.Fatalf("the reader got %d versions, the game has %d", len(got), final.GetVersion())
	}
}

// TestAcknowledgedMovesSurviveAFailover: with --redis-wait-replicas, a
// move is acknowledged only once a replica holds it. The replica stops
// getting the master's writes while it still acknowledges what it has, as
// a lagging replica does; a move, and its retries on every path a retry
// can take, must then be refused as unconfirmed, although the master has
// it. The
// master dies and the replica is promoted, as Sentinel would: every
// acknowledged move is there, and the refused one is applied once when
// retried against the new master, whose event log runs without a gap.
func TestAcknowledgedMovesSurviveAFailover(t *testing.T) {
	pair := redistest.NewPair(t)
	master, replica := pair.Master, pair.Replica
	var prefix string
	process := func(addr string) *gametest.Env {
		return gametest.StartOn(t, addr, func(c *game.Config) {
			c.SigningKeys, c.WaitReplicas, c.WaitTimeout = keyOne, 1, time.Second
			if prefix != "" {
				c.KeyPrefix = prefix
			}
		})
	}
	a := process(master.Addr)
	prefix = a.Config.KeyPrefix
	b, c := process(master.Addr), process(master.Addr)
	tb := xiangqi(t, a)
	move := func(env *gametest.Env, side commonv1.Side, requestID, mv string) (*gamev1.MakeMoveResponse, error) {
		return env.Client.MakeMove(tb.as(side), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: requestID, Move: &commonv1.Move{Coordinate: mv}})
	}
	acked := []string{"h3e3", "h10g8"}
	if _, err := move(a, commonv1.Side_SIDE_FIRST, rid(), acked[0]); err != nil {
		t.Fatal(err)
	}
	// c commits the last confirmed move, so c's own connections have
	// nothing unconfirmed on them when it retries below.
	if _, err := move(c, commonv1.Side_SIDE_SECOND, rid(), acked[1]); err != nil {
		t.Fatal(err)
	}

	// Everything so far reaches the replica before it falls behind, so
	// that a retry that waited on nothing of its own would pass.
	sync := master.Client(t)
	// WAIT covers what its own connection wrote, up to the last write.
	if err := sync.Set(context.Background(), prefix+"synced", 1, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := sync.Wait(context.Background(), 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("replica before it falls behind: WAIT = %d, %v", n, err)
	}
	pair.Link.Blackhole()
	const third = "h1g3"
	req := rid()
	unconfirmed := func(what string, env *gametest.Env) {
		t.Helper()
		_, err := move(env, commonv1.Side_SIDE_FIRST, req, third)
		if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "replicas") {
			t.Fatalf("%s, with the replica behind: %v, want Unavailable naming the replicas", what, err)
		}
	}
	unconfirmed("the move", a)
	// b has never seen the game: it finds the answer as it loads it.
	unconfirmed("its retry on another process", b)
	// c runs the retry on the state it committed: the commit script
	// finds the answer.
	unconfirmed("its retry on the process that made the move before", c)

	master.Kill()
	if err := replica.Client(t).ReplicaOf(context.Background(), "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	// The new master gets a replica of its own, as Sentinel would give it
	// the old one's others, so that its commits can be confirmed.
	redistest.Replica(t, replica.Addr)
	d := process(replica.Addr)
	tb.env = d
	var played []string
	for _, m := range tb.get(t).GetMoves() {
		played = append(played, m.GetMove().GetCoordinate())
	}
	if !slices.Equal(played, acked) {
		t.Fatalf("after the failover the game holds %v, want the acknowledged %v", played, acked)
	}
	resp, err := move(d, commonv1.Side_SIDE_FIRST, req, third)
	if err != nil {
		t.Fatalf("retry after the failover: %v", err)
	}
	again, err := move(d, commonv1.Side_SIDE_FIRST, req, third)
	if err != nil || !proto.Equal(again, resp) {
		t.Fatalf("second retry after the failover: %v (%v), want the same answer %v", again, err, resp)
	}
	g := tb.get(t)
	if n := len(g.GetMoves()); n != 3 || g.GetMoves()[2].GetMove().GetCoordinate() != third {
		t.Fatalf("after the retries the game holds %v, want %v then %s once", g.GetMoves(), acked, third)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := d.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	for want := uint64(1); want <= g.GetVersion(); {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("stream after the failover, waiting for version %d: %v", want, err)
		}
		if e := m.GetEvent(); e != nil {
			if e.GetVersion() != want {
				t.Fatalf("stream after the failover: version %d, want %d", e.GetVersion(), want)
			}
			want++
		}
	}
}

// TestDeadlinesWaitForTheirReplicasOnACluster: on a cluster a game's
// deadline may live on another master than the game. With
// --redis-wait-replicas, a move whose new deadline that master's replica
// cannot confirm is refused before it is committed, since a failover
// there could lose the deadline and with it the game's timeout.
func TestDeadlinesWaitForTheirReplicasOnACluster(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 3)
	cl.AddReplicas(t)
	env := gametest.StartOn(t, cl.URL(), func(c *game.Config) { c.WaitReplicas, c.WaitTimeout = 1, time.Second })
	rdb := cl.Client(t)
	idx, err := deadline.New(rdb, env.Config.KeyPrefix, env.Config.DeadlineShards)
	if err != nil {
		t.Fatal(err)
	}
	master := func(key string) string {
		t.Helper()
		node, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return node.Options().Addr
	}
	clocked := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(time.Minute)}}}
	var tb *table
	var deadlineMaster string
	for tb == nil || deadlineMaster == master(env.Config.KeyPrefix+"{g:"+tb.id+"}") {
		tb = create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: clocked})
		deadlineMaster = master(idx.Key(idx.ShardOf(tb.id)))
	}
	i := slices.IndexFunc(cl.Nodes, func(s *redistest.Server) bool { return s.Addr == deadlineMaster })
	behind := cl.Replicas[i]

	behind.Pause(t)
	_, err = env.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: "first", Move: &commonv1.Move{Coordinate: "h3e3"}})
	behind.Resume(t)
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "replicas") {
		t.Fatalf("move whose deadline's replica is stalled: %v, want Unavailable naming the replicas", err)
	}
	if n := len(tb.get(t).GetMoves()); n != 0 {
		t.Fatalf("the refused move was committed: %d moves", n)
	}
	retrying(t, "the move once the replica is back", func() error {
		_, err := env.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: "first", Move: &commonv1.Move{Coordinate: "h3e3"}})
		return err
	})
	if n := len(tb.get(t).GetMoves()); n != 1 {
		t.Fatalf("after the retry the game holds %d moves, want 1", n)
	}
}

// TestConfirmedRetryReachesTheStreams: a move whose replicas did not
// confirm it in time published nothing. Once its retry confirms it, the
// game's streams must get it, with no later event to reveal it.
func TestConfirmedRetryReachesTheStreams(t *testing.T) {
	pair := redistest.NewPair(t)
	env := gametest.StartOn(t, pair.Master.Addr, func(c *game.Config) { c.WaitReplicas, c.WaitTimeout = 1, 300*time.Millisecond })
	tb := xiangqi(t, env)
	moves := liveMoves(t, env, tb)
	move := func() error {
		_, err := env.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: "second", Move: &commonv1.Move{Coordinate: "h10g8"}})
		return err
	}
	pair.Link.Blackhole()
	if err := move(); status.Code(err) != codes.Unavailable {
		t.Fatalf("move with the replica behind: %v, want Unavailable", err)
	}
	select {
	case mv := <-moves:
		t.Fatalf("the stream got %s before any replica held it", mv)
	case <-time.After(300 * time.Millisecond):
	}
	pair.Link.Restore()
	retrying(t, "the move once the replica is back", move)
	select {
	case mv := <-moves:
		if mv != "h10g8" {
			t.Fatalf("the stream got %s, want h10g8", mv)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the stream never got the move its retry confirmed")
	}
}

// TestPresenceWhoseWaitFailedIsPublishedOnceConfirmed: a seat's stream
// opens while the replica is behind, so the "connected" commit is stored
// but not confirmed, and publishes nothing. Its retry at the next lease
// renewal finds nothing left to change; it must still confirm the commit
// and let the game's other streams see it.
func TestPresenceWhoseWaitFailedIsPublishedOnceConfirmed(t *testing.T) {
	pair := redistest.NewPair(t)
	env := gametest.StartOn(t, pair.Master.Addr, func(c *game.Config) {
		c.WaitReplicas, c.WaitTimeout, c.PresenceLease = 1, 300*time.Millisecond, 600*time.Millisecond
	})
	tb := xiangqi(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	watcher, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan *gamev1.Event, 16)
	go func() {
		for {
			m, err := watcher.Recv()
			if err != nil {
				return
			}
			if e := m.GetEvent(); e.GetMovePlayed() != nil || e.GetPlayerConnection() != nil {
				seen <- e
			}
		}
	}()
	// A move seen on the watcher shows it live.
	tb.move(t, "h3e3")
	if e := <-seen; e.GetMovePlayed() == nil {
		t.Fatalf("watcher got %v, want the move", e)
	}

	pair.Link.Blackhole()
	seat, err := env.Client.StreamEvents(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seat.Recv(); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-seen:
		t.Fatalf("watcher got %v before any replica held it", e)
	case <-time.After(time.Second):
	}
	pair.Link.Restore()
	select {
	case e := <-seen:
		if c := e.GetPlayerConnection(); c == nil || !c.GetConnected() || c.GetSide() != commonv1.Side_SIDE_SECOND {
			t.Fatalf("watcher got %v, want the second seat connected", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher never saw the seat connect")
	}
}

// TestUnacknowledgedMoveReachesTheStreams: a move whose replicas did not
// confirm it in time, and whose client never retries, is stored all the
// same. It is the opponent's turn, so the opponent must see the move: the
// process confirms the game itself once the replica is back, and the
// streams get it.
func TestUnacknowledgedMoveReachesTheStreams(t *testing.T) {
	pair := redistest.NewPair(t)
	env := gametest.StartOn(t, pair.Master.Addr, func(c *game.Config) { c.WaitReplicas, c.WaitTimeout = 1, 300*time.Millisecond })
	tb := xiangqi(t, env)
	moves := liveMoves(t, env, tb)
	pair.Link.Blackhole()
	_, err := env.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: "second", Move: &commonv1.Move{Coordinate: "h10g8"}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("move with the replica behind: %v, want Unavailable", err)
	}
	select {
	case mv := <-moves:
		t.Fatalf("the stream got %s before any replica held it", mv)
	case <-time.After(time.Second):
	}
	pair.Link.Restore()
	select {
	case mv := <-moves:
		if mv != "h10g8" {
			t.Fatalf("the stream got %s, want h10g8", mv)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream never got the stored move, which no one retried")
	}
}

// TestAnUnconfirmedMoveOfADeadReplicaReachesTheStreams: with
// --redis-wait-replicas, replica a commits Black's move while the Redis
// replica lags, so the wait fails and nothing is published; then a dies
// (cut off from Redis for good) before it can confirm the move. The Redis
// replica catches up. The move is stored, Red's turn and clock run, and a
// stream of the game on replica b, whose heartbeat finds a commit past the
// confirmed version, confirms it and delivers the move, with nobody
// issuing a command or a read.
func TestAnUnconfirmedMoveOfADeadReplicaReachesTheStreams(t *testing.T) {
	pair := redistest.NewPair(t)
	proxy := redistest.NewProxy(t, pair.Master.Addr)
	edit := func(prefix string) func(*game.Config) {
		return func(c *game.Config) {
			c.SigningKeys, c.WaitReplicas, c.WaitTimeout = keyOne, 1, 300*time.Millisecond
			if prefix != "" {
				c.KeyPrefix = prefix
			}
		}
	}
	b := gametest.StartOn(t, pair.Master.Addr, edit(""))
	a := gametest.StartOn(t, proxy.Addr(), edit(b.Config.KeyPrefix))
	tb := xiangqi(t, b)
	moves := liveMoves(t, b, tb) // h3e3 seen live on b

	pair.Link.Blackhole()
	_, err := a.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.MakeMoveRequest{
		GameId: tb.id, RequestId: "second", Move: &commonv1.Move{Coordinate: "h10g8"}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("move with the replica behind: %v, want Unavailable", err)
	}
	proxy.Cut() // a dies: neither it nor its client will confirm the move
	pair.Link.Restore()

	select {
	case mv := <-moves:
		if mv != "h10g8" {
			t.Fatalf("the stream on b got %s, want h10g8", mv)
		}
	case <-time.After(5 * time.Second):
		// Show that the move is stored all along: a read confirms it.
		g, gerr := b.Client.GetGame(context.Background(), &gamev1.GetGameRequest{GameId: tb.id})
		t.Fatalf("the stream on b (heartbeat %v) never got h10g8 within 5s after the Redis replica caught up; "+
			"yet the move is stored: GetGame on b then shows %d moves, turn %v (%v)",
			b.Config.Heartbeat, len(g.GetGame().GetMoves()), g.GetGame().GetTurn(), gerr)
	}
}

// liveMoves opens a spectator's stream of tb and returns the moves it
// gets, once a first move (h3e3), seen on it, shows it live: from then on
// only notifications, not a read of the log, bring it events.
func liveMoves(t *testing.T, env *gametest.Env, tb *table) <-chan string {
	t.Helper()
	moves := streamMoves(t, env, tb)
	tb.move(t, "h3e3")
	select {
	case mv := <-moves:
		if mv != "h3e3" {
			t.Fatalf("the stream got %s, want h3e3", mv)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream never got the first move")
	}
	return moves
}

// streamMoves opens a spectator's stream of tb from its start and returns
// the moves it gets.
func streamMoves(t *testing.T, env *gametest.Env, tb *table) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	moves := make(chan string, 8)
	go func() {
		// Closed when the stream ends, so that a test waiting for a move
		// fails instead of waiting for ever.
		defer close(moves)
		for {
			m, err := st.Recv()
			if err != nil {
				return
			}
			if mv := m.GetEvent().GetMovePlayed(); mv != nil {
				moves <- mv.GetMove().GetCoordinate()
			}
		}
	}()
	return moves
}

// TestReadsShowOnlyConfirmedCommits: while a move is stored but not
// confirmed by the replicas, no read shows it: a new stream's read of the
// log stops before it, and a read of the game (GetGame, a snapshot) is
// refused rather than show it. Once the replica is back, both show it.
func TestReadsShowOnlyConfirmedCommits(t *testing.T) {
	pair := redistest.NewPair(t)
	env := gametest.StartOn(t, pair.Master.Addr, func(c *game.Config) { c.WaitReplicas, c.WaitTimeout = 1, 300*time.Millisecond })
	tb := xiangqi(t, env)
	liveMoves(t, env, tb) // h3e3, confirmed
	pair.Link.Blackhole()
	_, err := env.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: "second", Move: &commonv1.Move{Coordinate: "h10g8"}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("move with the replica behind: %v, want Unavailable", err)
	}
	if _, err := env.Client.GetGame(context.Background(), &gamev1.GetGameRequest{GameId: tb.id}); status.Code(err) != codes.Unavailable {
		t.Fatalf("GetGame with an unconfirmed move: %v, want Unavailable", err)
	}
	// A stream from the start, without a snapshot, reads the log.
	moves := streamMoves(t, env, tb)
	if mv := <-moves; mv != "h3e3" {
		t.Fatalf("new stream: first move %s, want h3e3", mv)
	}
	select {
	case mv := <-moves:
		t.Fatalf("new stream showed %s before any replica held it", mv)
	case <-time.After(time.Second):
	}
	// Nor does a command decided on it: Black moving again would hear that
	// it is Red's turn, and learn of a move a failover could take back.
	_, err = env.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: "again", Move: &commonv1.Move{Coordinate: "b10c8"}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a command on a game with an unconfirmed move: %v, want Unavailable", err)
	}
	// Nor a deadline's expiry, whose answer shows the game.
	if _, err := env.Client.ExpireDeadline(context.Background(), &gamev1.ExpireDeadlineRequest{GameId: tb.id, DeadlineUnixMs: time.Now().UnixMilli()}); status.Code(err) != codes.Unavailable {
		t.Fatalf("ExpireDeadline on a game with an unconfirmed move: %v, want Unavailable", err)
	}
	pair.Link.Restore()
	select {
	case mv := <-moves:
		if mv != "h10g8" {
			t.Fatalf("new stream got %s, want h10g8", mv)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("new stream never got the move once confirmed")
	}
	var g *gamev1.GetGameResponse
	retrying(t, "GetGame once the replica is back", func() (err error) {
		g, err = env.Client.GetGame(context.Background(), &gamev1.GetGameRequest{GameId: tb.id})
		return err
	})
	if n := len(g.GetGame().GetMoves()); n != 2 {
		t.Fatalf("GetGame shows %d moves, want 2", n)
	}
}

// TestAStreamLivesThroughARedisCrash: Redis is killed and comes back a few
// seconds later. Streams open all along must not be dropped, neither
// while Redis is away nor when it comes back (their first reads may then
// fail a little longer: the client's dial back-off, the data loading):
// each delivers the next move, on the same stream.
func TestAStreamLivesThroughARedisCrash(t *testing.T) {
	srv := redistest.Own(t)
	env := gametest.StartOn(t, srv.Addr, nil)
	tb := xiangqi(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	version := tb.get(t).GetVersion()
	// Several streams: whether one's first read after the crash fails
	// depends on timing; with thirty, one of them does.
	const streams = 30
	events := make(chan *gamev1.Event, 64)
	failed := make(chan error, streams)
	for range streams {
		// With a snapshot, so that the stream is known to be under way
		// (past its first read of the game) before Redis goes.
		st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, Snapshot: true})
		if err != nil {
			t.Fatal(err)
		}
		if m, err := st.Recv(); err != nil || m.GetSnapshot().GetVersion() != version {
			t.Fatalf("snapshot %v (%v); want one at version %d", m, err, version)
		}
		go func() {
			for {
				m, err := st.Recv()
				if err != nil {
					failed <- err
					return
				}
				if e := m.GetEvent(); e != nil {
					events <- e
				}
			}
		}()
	}

	// Calls while Redis is away, as players' would be: their failed dials
	// make the client back off, so the streams' first reads once Redis is
	// back may fail too.
	calling, stopCalling := context.WithCancel(ctx)
	calls := make(chan struct{})
	go func() {
		defer close(calls)
		for calling.Err() == nil {
			_, _ = env.Client.GetGame(calling, &gamev1.GetGameRequest{GameId: tb.id})
			time.Sleep(10 * time.Millisecond)
		}
	}()
	err := srv.CrashFor(ctx, 2*time.Second)
	stopCalling()
	<-calls
	if err != nil {
		t.Fatal(err)
	}
	var moved *gamev1.MakeMoveResponse
	req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h3e3"}}
	retrying(t, "move", func() (err error) {
		moved, err = env.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), req)
		return err
	})
	for got := 0; got < streams; {
		select {
		case e := <-events:
			if e.GetVersion() != moved.GetGame().GetVersion() || e.GetMovePlayed().GetMove().GetCoordinate() != "h3e3" {
				t.Fatalf("a stream went on with version %d (%v); want the move h3e3 at version %d", e.GetVersion(), e, moved.GetGame().GetVersion())
			}
			got++
		case err := <-failed:
			t.Fatalf("a stream was dropped over the crash: %v", err)
		case <-ctx.Done():
			t.Fatalf("the move made after the crash reached %d of %d streams", got, streams)
		}
	}
}

// TestABusyRedisIsUnavailableNotABug: a Redis running a script past its
// busy threshold answers BUSY, and runs nothing else; the command did not
// run, so a retry is safe: calls get Unavailable, not Internal, and a
// stream opened meanwhile waits for it and then delivers every version.
func TestABusyRedisIsUnavailableNotABug(t *testing.T) {
	srv := redistest.Own(t, "--busy-reply-threshold", "100")
	env := gametest.StartOn(t, srv.Addr, nil)
	tb := xiangqi(t, env)
	tb.move(t, "h3e3")
	version := tb.get(t).GetVersion()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	busy := make(chan error, 1)
	go func() { busy <- srv.Client(t).Eval(ctx, "local i = 0 while true do i = i + 1 end", nil).Err() }()
	killed := false
	defer func() {
		if !killed {
			_ = srv.Client(t).ScriptKill(context.Background()).Err()
		}
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := srv.Client(t).Ping(ctx).Err(); err != nil && strings.HasPrefix(err.Error(), "BUSY ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Redis never answered BUSY")
		}
	}
	_, err := env.Client.GetGame(ctx, &gamev1.GetGameRequest{GameId: tb.id})
	wantCode(t, err, codes.Unavailable)
	_, err = env.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h10g8"}})
	wantCode(t, err, codes.Unavailable)
	// The process holds the game's head: the stream starts, and its read
	// of the log meets BUSY.
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan uint64, 16)
	ended := make(chan error, 1)
	go func() {
		for {
			m, err := st.Recv()
			if err != nil {
				ended <- err
				return
			}
			if e := m.GetEvent(); e != nil {
				got <- e.GetVersion()
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	if err := srv.Client(t).ScriptKill(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	killed = true
	<-busy
	retrying(t, "the move after the script", func() error {
		_, err := env.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: "after-busy", Move: &commonv1.Move{Coordinate: "h10g8"}})
		return err
	})
	for want := uint64(1); want <= version+1; want++ {
		select {
		case v := <-got:
			if v != want {
				t.Fatalf("the stream opened while Redis was busy sent version %d, want %d", v, want)
			}
		case err := <-ended:
			t.Fatalf("the stream opened while Redis was busy ended before version %d: %v", want, err)
		case <-ctx.Done():
			t.Fatalf("the stream opened while Redis was busy did not send version %d", want)
		}
	}
}

// TestAFullRedisRefusesMovesUnavailable: Redis at its maxmemory with the
// noeviction policy, as deployments are told to run it, refuses writes.
// A move then fails with Unavailable, as in an outage, since its retry
// is safe: Redis refused the commit at its first write (or the deadline
// written ahead of it), so the game, its log and its moves are as they
// were. Once memory is freed, the retry with the same request id is
// applied once.
func TestAFullRedisRefusesMovesUnavailable(t *testing.T) {
	srv := redistest.Own(t, "--maxmemory-policy", "noeviction")
	env := gametest.StartOn(t, srv.Addr, nil)
	timed := create(t, env, &gamev1.CreateGameRequest{
		Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true,
		TimeControl: &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(time.Hour)}}},
	})
	ctx := context.Background()
	rdb := srv.Client(t)
	for _, tb := range []*table{xiangqi(t, env), timed} {
		tb.move(t, "h3e3")
		before := tb.get(t)
		if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
			t.Fatal(err)
		}
		req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h10g8"}}
		_, err := env.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), req)
		wantCode(t, err, codes.Unavailable)
		if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
			t.Fatal(err)
		}
		if g := tb.get(t); g.GetVersion() != before.GetVersion() || len(g.GetMoves()) != len(before.GetMoves()) {
			t.Fatalf("a refused move changed the game: version %d, %d moves; want %d, %d", g.GetVersion(), len(g.GetMoves()), before.GetVersion(), len(before.GetMoves()))
		}
		var resp *gamev1.MakeMoveResponse
		retrying(t, "the move again", func() (err error) {
			resp, err = env.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), req)
			return err
		})
		if _, err := env.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), req); err != nil {
			t.Fatalf("the move's retry: %v", err)
		}
		if g := tb.get(t); g.GetVersion() != resp.GetGame().GetVersion() || len(g.GetMoves()) != len(before.GetMoves())+1 {
			t.Fatalf("after the retries: version %d, %d moves; want %d, %d", g.GetVersion(), len(g.GetMoves()), resp.GetGame().GetVersion(), len(before.GetMoves())+1)
		}
	}
}
