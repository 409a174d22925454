// Package gametest starts a real game service on a real Redis for tests of
// this and other services, with keys isolated under a unique prefix.
package gametest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/apptest"
	"github.com/palacehq/palace/pkg/auth"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/pkg/rulespb"
	"github.com/palacehq/palace/services/game"
)

// Env is a running game service.
type Env struct {
	Addr string
	// Client presents a service credential (apptest.AsService) besides
	// the seat credentials a test adds (As).
	Client gamev1.GameServiceClient
	Conn   *grpc.ClientConn
	Redis  redis.UniversalClient
	Config game.Config
	// Stop stops the service, as a stopped process (once; the test's end
	// does it too).
	Stop func()
}

// Start runs the game service until tb ends; edit adjusts its config.
func Start(tb testing.TB, edit func(*game.Config)) *Env {
	tb.Helper()
	return StartOn(tb, redistest.Addr(tb), edit)
}

// StartOn is Start with the service's Redis at redisAddr (a
// redistest.Proxy, to take Redis away from it).
func StartOn(tb testing.TB, redisAddr string, edit func(*game.Config)) *Env {
	tb.Helper()
	return StartServing(tb, redisAddr, nil, edit)
}

// StartServing is StartOn with the process's own configuration (how its
// port serves: connection ages, keepalives) edited by editApp.
func StartServing(tb testing.TB, redisAddr string, editApp func(*app.Config), edit func(*game.Config)) *Env {
	tb.Helper()
	cfg := game.DefaultConfig()
	cfg.KeyPrefix = redistest.Prefix(tb)
	cfg.Heartbeat = 200 * time.Millisecond
	cfg.PresenceGrace = 100 * time.Millisecond
	if edit != nil {
		edit(&cfg)
	}
	if cfg.SigningKeys == "" {
		// A key of its own, random in id and secret as that of a process
		// without keys, but known to the test, which signs the credentials
		// the service hands nobody: an AI seat's, to act as its worker would.
		secret := make([]byte, 36)
		rand.Read(secret)
		cfg.SigningKeys = "test-" + hex.EncodeToString(secret[32:]) + ":" + hex.EncodeToString(secret[:32])
	}
	appCfg := app.Config{
		Listen: "127.0.0.1:0", RedisAddr: redisAddr, LogFormat: "text", LogLevel: "error",
		ShutdownTimeout: 5 * time.Second, MaxRecvBytes: 1 << 20,
		ServiceKeys: apptest.ServiceKeys,
	}
	if editApp != nil {
		editApp(&appCfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, app.Options{
			Name:      "game-test",
			Config:    appCfg,
			Services:  []app.Binder{game.Bind(cfg)},
			LogOutput: io.Discard,
			OnServing: func(a string) { addrc <- a },
		})
	}()
	var serving string
	select {
	case serving = <-addrc:
	case err := <-done:
		cancel()
		tb.Fatalf("game service did not start: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		tb.Fatal("game service did not start within 20s")
	}
	// The client may create games: it presents a service credential, as
	// matchmaking or a tournament system does.
	cc, err := grpc.NewClient(serving, grpc.WithTransportCredentials(insecure.NewCredentials()), apptest.AsService(tb))
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	rdb := redistest.Client(tb)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cc.Close()
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("game service stopped with %v", err)
			}
		})
	}
	tb.Cleanup(stop)
	return &Env{Addr: serving, Client: gamev1.NewGameServiceClient(cc), Conn: cc, Redis: rdb, Config: cfg, Stop: stop}
}

// SeatCredential signs a credential for a seat of a game on this service,
// as the service signs an AI worker's for a job: CreateGame gives none for
// an AI seat.
func (e *Env) SeatCredential(tb testing.TB, game, player string, side commonv1.Side) string {
	tb.Helper()
	ring, err := auth.ParseKeyring(e.Config.SigningKeys)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := rulespb.SideFrom(side)
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	tok, err := ring.Sign(auth.Claims{
		Kind: auth.KindSeat, Subject: player, Game: game, Side: s.String(),
		IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// As returns ctx carrying a seat credential.
func As(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}
