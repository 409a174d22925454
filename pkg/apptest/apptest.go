// Package apptest runs services in-process for tests, through the same
// app.Run path as the real binaries, on a free loopback port.
package apptest

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/auth"
)

// ServiceKeys are the --service-keys of every process the test helpers
// start, so that services a test runs apart trust each other.
const ServiceKeys = "test:746573742d736572766963652d6b65792d6e6f742d666f722d70726f64756374696f6e21"

// AsService is the dial option of a client that presents a service
// credential signed with ServiceKeys, as an operator's tool or a
// tournament system does: it may create games. Without it a client is
// a player's app.
func AsService(tb testing.TB) grpc.DialOption {
	tb.Helper()
	creds, err := auth.ServiceCredentialsFromKeys(ServiceKeys, "test", time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	return grpc.WithPerRPCCredentials(creds)
}

// Start runs the binders until tb ends and returns a client connection to
// them that presents a service credential (AsService). redisAddr "" runs
// without Redis (cfg.NoRedis).
func Start(tb testing.TB, redisAddr string, binders ...app.Binder) *grpc.ClientConn {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	cfg := app.Config{
		Listen: "127.0.0.1:0", RedisAddr: redisAddr, NoRedis: redisAddr == "",
		LogFormat: "text", LogLevel: "error", ShutdownTimeout: 5 * time.Second, MaxRecvBytes: 1 << 20,
		ServiceKeys: ServiceKeys,
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
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), AsService(tb))
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

// LogBuffer collects a process's log lines, safe to read while the
// process (or a library's goroutine) still writes them.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
