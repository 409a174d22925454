// Package apptest runs services in-process for tests, through the same
// app.Run path as the real binaries, on a free loopback port.
package apptest

import (
	"context"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/palacehq/palace/pkg/app"
)

// Start runs the binders until tb ends and returns a client connection to
// them. redisAddr "" runs without Redis (cfg.NoRedis).
func Start(tb testing.TB, redisAddr string, binders ...app.Binder) *grpc.ClientConn {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	cfg := app.Config{
		Listen: "127.0.0.1:0", RedisAddr: redisAddr, NoRedis: redisAddr == "",
		LogFormat: "text", LogLevel: "error", ShutdownTimeout: 5 * time.Second, MaxRecvBytes: 1 << 20,
	}
	go func() {
		done <- app.Run(ctx, app.Options{Name: "test", Config: cfg, Services: binders, LogOutput: io.Discard, OnServing: func(a string) { addrc <- a }})
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		cancel()
		tb.Fatalf("services did not start: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		tb.Fatal("services did not start within 20s")
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cc.Close()
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("services stopped with %v", err)
		}
	})
	return cc
}
