package handler

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/auth"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// lateReply holds, once armed, the reply of one read (a pipeline with
// TIME) that mentions match: Redis answered it at once, but the answer
// reaches the handler only when release closes, as a reply delayed on
// the network, or a goroutine descheduled, would.
type lateReply struct {
	match    atomic.Pointer[string]
	answered chan struct{}
	release  chan struct{}
}

func (l *lateReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *lateReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (l *lateReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		m := l.match.Load()
		if m == nil || !hasTimeAndMentions(cmds, *m) || !l.match.CompareAndSwap(m, nil) {
			return err
		}
		close(l.answered)
		<-l.release
		return err
	}
}

func hasTimeAndMentions(cmds []redis.Cmder, s string) bool {
	var tm, mentions bool
	for _, c := range cmds {
		if _, ok := c.(*redis.TimeCmd); ok {
			tm = true
		}
		for _, a := range c.Args() {
			if str, ok := a.(string); ok && strings.Contains(str, s) {
				mentions = true
			}
		}
	}
	return tm && mentions
}

// newLateReplyHandler is a handler on the real Redis whose client can
// hold back the reply of a read (lateReply).
func newLateReplyHandler(t *testing.T) (*Handler, *lateReply) {
	t.Helper()
	rdb := redistest.Client(t)
	hook := &lateReply{answered: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(hook)
	ring, _, err := auth.KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	return newRedisHandlerOn(t, rdb, redistest.Prefix(t), ring), hook
}

// TestALateReplyNeverTurnsTheClockBack: now() is anchored by reads, to
// the Redis TIME of a read taken as "now" when its reply is handled. A
// read of another game whose reply comes late does not turn it back, so a
// command on a cached state is never judged and stamped earlier than the
// one before it on the same game: server time is monotonic within a
// process.
func TestALateReplyNeverTurnsTheClockBack(t *testing.T) {
	const late = 300 * time.Millisecond
	h, hook := newLateReplyHandler(t)
	x, redX, blackX := newXiangqiFor(t, h, "x")
	y, redY, _ := newXiangqiFor(t, h, "y")

	// A read of game y: Redis answers at once, the answer arrives late.
	hook.match.Store(&y)
	read := make(chan error, 1)
	go func() {
		_, err := h.GetGame(redY, &gamev1.GetGameRequest{GameId: y})
		read <- err
	}()
	<-hook.answered
	time.Sleep(late)
	// Meanwhile another read (the lease loop's, or any command's) teaches
	// the process Redis' time as it is now, and Red moves in game x.
	h.syncTime(t.Context())
	before := h.now()
	red, err := h.MakeMove(redX, &gamev1.MakeMoveRequest{GameId: x, RequestId: "r1", Move: &commonv1.Move{Coordinate: "h3e3"}})
	if err != nil {
		t.Fatal(err)
	}
	close(hook.release)
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	after := h.now()
	black, err := h.MakeMove(blackX, &gamev1.MakeMoveRequest{GameId: x, RequestId: "b1", Move: &commonv1.Move{Coordinate: "h10g8"}})
	if err != nil {
		t.Fatal(err)
	}
	if after.Before(before) {
		t.Errorf("now() stepped back by %v when the late reply was handled", before.Sub(after).Round(time.Millisecond))
	}
	redAt, blackAt := red.GetMove().GetPlayedAt().AsTime(), black.GetMove().GetPlayedAt().AsTime()
	if blackAt.Before(redAt) {
		t.Fatalf("Black's reply is stamped %v before Red's move in the same game, on the same process", redAt.Sub(blackAt).Round(time.Millisecond))
	}
}

// TestALateReplyDoesNotSaveAMoveAfterTheFlag: Black's time (1 s, Fischer,
// no lag grace) has run out 150 ms before Black moves, on a cached state,
// just after a read of another game whose reply came 300 ms late. Judged
// by Redis' time the move is late, and the game ends on time: the late
// reply did not turn the process' time back before the flag.
func TestALateReplyDoesNotSaveAMoveAfterTheFlag(t *testing.T) {
	const late = 300 * time.Millisecond
	h, hook := newLateReplyHandler(t)
	tok, err := auth.ServiceToken(h.cfg.ServiceKeys, "test", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	created, err := h.CreateGame(metadata.NewIncomingContext(t.Context(), metadata.Pairs(auth.ServiceHeader, tok)), &gamev1.CreateGameRequest{
		RequestId: "timed", Kind: commonv1.GameKind_GAME_KIND_XIANGQI,
		Seats:       []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, PlayerId: "a"}, {Side: commonv1.Side_SIDE_SECOND, PlayerId: "b"}},
		TimeControl: &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(time.Second)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	x := created.GetGameId()
	seat := map[commonv1.Side]context.Context{}
	for _, c := range created.GetCredentials() {
		seat[c.GetSide()] = metadata.NewIncomingContext(t.Context(), metadata.Pairs("authorization", "Bearer "+c.GetToken()))
	}
	redX, blackX := seat[commonv1.Side_SIDE_FIRST], seat[commonv1.Side_SIDE_SECOND]
	y, redY, _ := newXiangqiFor(t, h, "y")
	move := func(ctx context.Context, id, m string) (*gamev1.MakeMoveResponse, error) {
		return h.MakeMove(ctx, &gamev1.MakeMoveRequest{GameId: id, RequestId: m, Move: &commonv1.Move{Coordinate: m}})
	}
	for _, m := range []struct {
		ctx context.Context
		mv  string
	}{{redX, "h3e3"}, {blackX, "h10g8"}} {
		if _, err := move(m.ctx, x, m.mv); err != nil {
			t.Fatal(err)
		}
	}
	red, err := move(redX, x, "h1g3")
	if err != nil {
		t.Fatal(err)
	}
	blackFrom := red.GetMove().GetPlayedAt().AsTime() // Black's 1 s runs from here
	// 150 ms before Black's flag, a read of game y is answered at once; its
	// answer arrives 300 ms later, 150 ms after the flag.
	for h.now().Before(blackFrom.Add(time.Second - late/2)) {
		time.Sleep(time.Millisecond)
	}
	hook.match.Store(&y)
	read := make(chan error, 1)
	go func() {
		_, err := h.GetGame(redY, &gamev1.GetGameRequest{GameId: y})
		read <- err
	}()
	<-hook.answered
	time.Sleep(late)
	close(hook.release)
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if _, err := move(blackX, x, "b10c8"); err == nil {
		st, _ := h.store.Load(t.Context(), x, "")
		t.Fatalf("Black's move, made %v after Black's 1 s ran out by Redis' clock (%v), was accepted", st.Now.Sub(blackFrom.Add(time.Second)).Round(time.Millisecond), st.Now.Sub(blackFrom).Round(time.Millisecond))
	}
}
