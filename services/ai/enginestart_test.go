package ai_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/apptest"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/ai"
)

// running says whether pid is a live process (not gone, not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] != 'Z'
}

// TestAFailedStartClosesTheEnginesItStarted: with an external UCI engine,
// the service starts one engine per worker. When a later worker's engine
// fails to start, the service does not start, and the engines it started
// for the workers before are closed: an engine process outlives the
// context it was started with.
func TestAFailedStartClosesTheEnginesItStarted(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "engine")
	// The first start is a working engine; every later one fails at once.
	body := fmt.Sprintf("#!/bin/sh\nif [ -e %[1]q/started ]; then exit 1; fi\ntouch %[1]q/started\necho $$ > %[1]q/pid\nPALACE_TEST_UCI_ENGINE=1 exec %[2]q\n", dir, self)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := aiConfig(redistest.Prefix(t), 2)
	cfg.UCIEngine = script
	cfg.GameAddr = "127.0.0.1:1" // dialled lazily; never called
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = app.Run(ctx, app.Options{
		Name: "test", Services: []app.Binder{ai.Bind(cfg)}, LogOutput: io.Discard,
		Config: app.Config{
			Listen: "127.0.0.1:0", RedisAddr: redistest.Addr(t), LogFormat: "text", LogLevel: "error",
			ShutdownTimeout: 5 * time.Second, MaxRecvBytes: 1 << 20, ServiceKeys: apptest.ServiceKeys,
		},
	})
	if err == nil {
		t.Fatal("Bind succeeded though the second worker's engine could not start")
	}
	raw, rerr := os.ReadFile(filepath.Join(dir, "pid"))
	if rerr != nil {
		t.Fatalf("the first engine never started: %v (Bind: %v)", rerr, err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	// uci's Close waits up to 2 s for an engine to exit, then kills it.
	for end := time.Now().Add(4 * time.Second); running(pid) && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	if running(pid) {
		t.Fatalf("Bind failed (%v), but the engine it started for worker 0 (pid %d) still runs: never closed", err, pid)
	}
}
