package worker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/aijobs"
	"github.com/palacehq/palace/pkg/redistest"
)

// noTime refuses TIME, as a Redis whose ACL or rename-command
// leaves it out would; every other command passes.
type noTime struct{}

func (noTime) DialHook(next redis.DialHook) redis.DialHook { return next }

func (noTime) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "time") {
			cmd.SetErr(errors.New("NOPERM this user has no permissions to run the 'time' command"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (noTime) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// syncLog is a log written by several goroutines.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestAFailedClockReadingIsNoLostLease: a worker that cannot read Redis'
// clock (an ACL or rename-command that leaves TIME out) while its lease
// is renewed says so, and does not warn of a lease not renewed, a takeover
// risk that does not exist.
func TestAFailedClockReadingIsNoLostLease(t *testing.T) {
	rdb := redistest.Client(t)
	rdb.AddHook(noTime{})
	prefix := redistest.Prefix(t)
	q := aijobs.New(rdb, prefix)
	var out syncLog
	w := &Worker{Name: "w", Log: slog.New(slog.NewTextHandler(&out, nil)), Queue: q}
	stop := w.keepAlive(context.Background())
	stop()
	n, err := redistest.Client(t).Exists(context.Background(), prefix+"{ai}:alive:w").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("the lease was not renewed (key missing); log: %s", out.String())
	}
	if log := out.String(); strings.Contains(log, "not renewed") || !strings.Contains(log, "cannot read redis' clock") {
		t.Fatalf("the lease was renewed (its key exists) and the clock not read, yet the worker logged:\n%s", log)
	}
}
