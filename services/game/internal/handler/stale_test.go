package handler

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/auth"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// afterPipeline runs then once, right after the next load of a game (a
// pipeline starting with HMGET) once armed.
type afterPipeline struct {
	armed atomic.Bool
	then  func()
}

func (a *afterPipeline) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (a *afterPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (a *afterPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if len(cmds) > 0 && cmds[0].Name() == "hmget" && a.armed.CompareAndSwap(true, false) {
			a.then()
		}
		return err
	}
}

// TestStaleVersionNamesTheCurrentOne: a command with expected_version
// loses its compare-and-set to a commit of two events (a move that also
// declines a pending draw offer) made between its read and its commit by
// another process. The Aborted answer must name the version the game is
// at, which a client retrying with it needs, not the read one plus one.
func TestStaleVersionNamesTheCurrentOne(t *testing.T) {
	ring, _, err := auth.KeyringFromConfig("")
	if err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	hooked := redistest.Client(t)
	race := &afterPipeline{}
	hooked.AddHook(race)
	slow := newRedisHandlerOn(t, hooked, prefix, ring)
	other := newRedisHandlerOn(t, redistest.Client(t), prefix, ring)

	ctx := t.Context()
	tok, err := auth.ServiceToken(ring, "test", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	created, err := other.CreateGame(metadata.NewIncomingContext(ctx, metadata.Pairs(auth.ServiceHeader, tok)), &gamev1.CreateGameRequest{
		RequestId: "create", Kind: commonv1.GameKind_GAME_KIND_XIANGQI,
		Seats: []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, PlayerId: "a"}, {Side: commonv1.Side_SIDE_SECOND, PlayerId: "b"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetGameId()
	as := map[commonv1.Side]context.Context{}
	for _, c := range created.GetCredentials() {
		as[c.GetSide()] = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+c.GetToken()))
	}
	red, black := as[commonv1.Side_SIDE_FIRST], as[commonv1.Side_SIDE_SECOND]
	if _, err := other.MakeMove(red, &gamev1.MakeMoveRequest{GameId: id, RequestId: "m1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	offered, err := other.OfferDraw(red, &gamev1.OfferDrawRequest{GameId: id, RequestId: "offer"})
	if err != nil {
		t.Fatal(err)
	}
	seen := offered.GetGame().GetVersion()
	var current uint64
	race.then = func() {
		resp, err := other.MakeMove(black, &gamev1.MakeMoveRequest{GameId: id, RequestId: "m2", Move: &commonv1.Move{Coordinate: "h10g8"}})
		if err != nil {
			t.Errorf("the racing move: %v", err)
			return
		}
		current = resp.GetGame().GetVersion()
	}
	race.armed.Store(true)
	_, err = slow.Resign(red, &gamev1.ResignRequest{GameId: id, RequestId: "resign", ExpectedVersion: seen})
	if current != seen+2 {
		t.Fatalf("the racing move took the game from version %d to %d, want two events", seen, current)
	}
	want := fmt.Sprintf("version %d;", current)
	if status.Code(err) != codes.Aborted || !strings.Contains(status.Convert(err).Message(), want) {
		t.Fatalf("resign at version %d after a race to %d: %v; want Aborted naming %q", seen, current, err, want)
	}
}
