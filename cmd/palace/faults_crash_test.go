package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/apptest"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestAPalaceServeKilledIsNotChargedToTheSideToMove: the only palace
// serve (game and clock in one process) is killed with SIGKILL while Red
// has 3 s left, and comes back 5 s later, as a crashed pod does. No one
// could move meanwhile: once back, Red's move is taken, the dead time but
// a beat's grace excused (OUTAGE_EXCUSED), as after a clean stop. The
// silence was dated from the end of the dead process's presence lease
// (15 s), and the restarted clock flagged Red for time no server ran.
func TestAPalaceServeKilledIsNotChargedToTheSideToMove(t *testing.T) {
	// SIGTERM, the clean stop, passes: the comparison.
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) { stopWithRedToMove(t, sig) })
	}
}

func stopWithRedToMove(t *testing.T, sig syscall.Signal) {
	p := startServeProc(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0",
		"--seat-signing-keys", "k1:"+strings.Repeat("5e", 32))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cc, err := grpc.NewClient(p.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	svc, err := grpc.NewClient(p.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), apptest.AsService(t))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	games := gamev1.NewGameServiceClient(cc)
	created, err := gamev1.NewGameServiceClient(svc).CreateGame(ctx, &gamev1.CreateGameRequest{
		RequestId: "crash-" + redistest.Prefix(t), Kind: commonv1.GameKind_GAME_KIND_XIANGQI,
		Seats:       []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, PlayerId: "rc-a"}, {Side: commonv1.Side_SIDE_SECOND, PlayerId: "rc-b"}},
		TimeControl: &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(3 * time.Second)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	as := map[commonv1.Side]context.Context{}
	for _, c := range created.GetCredentials() {
		as[c.GetSide()] = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.GetToken())
	}
	id := created.GetGameId()
	move := func(side commonv1.Side, mv string) (*gamev1.MakeMoveResponse, error) {
		return games.MakeMove(as[side], &gamev1.MakeMoveRequest{GameId: id, RequestId: id + mv, Move: &commonv1.Move{Coordinate: mv}})
	}
	for _, m := range []struct {
		side commonv1.Side
		mv   string
	}{{commonv1.Side_SIDE_FIRST, "h3e3"}, {commonv1.Side_SIDE_SECOND, "h10g8"}} {
		if _, err := move(m.side, m.mv); err != nil {
			t.Fatalf("%s: %v", m.mv, err)
		}
	}
	// Red's clock runs, 3 s left.
	p.Signal(sig)
	time.Sleep(5 * time.Second)
	p.Start()
	resp, err := move(commonv1.Side_SIDE_FIRST, "h1g3")
	g, _ := games.GetGame(as[commonv1.Side_SIDE_FIRST], &gamev1.GetGameRequest{GameId: id})
	if err != nil || g.GetGame().GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
		t.Fatalf("palace serve stopped (%v) for 5 s with Red to move (3 s left): Red's first move once it is back: %v; game %v (%v ended by %v); "+
			"want the move taken and the dead time excused, as after a clean stop", sig, err, g.GetGame().GetStatus(), g.GetGame().GetResult(), g.GetGame().GetEndedBy())
	}
	_ = resp
}
