package game_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/apptest"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game"
)

// One server fault, one ERROR line: an operator alerting on the rate of
// ERROR lines, or counting faults from them, must not see each one twice.
// A GetGame that fails on Redis' answer (here a game's key holding a
// value of another type) is answered Internal, and was logged at ERROR
// twice: by apierr ("internal error", with the cause) and by the call's
// own line (msg=rpc code=Internal), which is at INFO now.
func TestOneInternalErrorIsOneErrorLine(t *testing.T) {
	cfg := game.DefaultConfig()
	cfg.KeyPrefix = redistest.Prefix(t)
	cfg.SigningKeys = "test-0011223344556677:" + strings.Repeat("ab", 32)
	var logs apptest.LogBuffer
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, app.Options{
			Name: "game",
			Config: app.Config{
				Listen: "127.0.0.1:0", RedisAddr: redistest.Addr(t), LogFormat: "text", LogLevel: "info",
				ShutdownTimeout: 5 * time.Second, MaxRecvBytes: 1 << 20, ServiceKeys: apptest.ServiceKeys,
			},
			Services:  []app.Binder{game.Bind(cfg)},
			LogOutput: &logs,
			OnServing: func(a string) { addrc <- a },
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("did not start: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("did not start")
	}
	rdb := redistest.Client(t)
	if err := rdb.Set(context.Background(), cfg.KeyPrefix+"{g:broken}", "not a hash", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), apptest.AsService(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	_, err = gamev1.NewGameServiceClient(cc).GetGame(cctx, &gamev1.GetGameRequest{GameId: "broken"})
	if status.Code(err) != codes.Internal {
		t.Fatalf("GetGame of a broken key: %v, want Internal", err)
	}
	time.Sleep(200 * time.Millisecond)
	var errorLines []string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, "level=ERROR") {
			errorLines = append(errorLines, l)
		}
	}
	if len(errorLines) != 1 {
		t.Fatalf("one failed call wrote %d ERROR lines, want 1:\n%s", len(errorLines), strings.Join(errorLines, "\n"))
	}
}
