//go:build unix

package uci

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCloseIsBoundedWhenStderrOutlivesTheGroup: Start copies the engine's
// stderr through a pipe, and cmd.Wait waits for that copy to end. A
// process outside the engine's process group that holds that stderr (a
// helper its wrapper started in a session of its own) kept Close blocked
// after the engine quit, for as long as the helper lived: the group kill
// cannot end it. The wait for the copy is bounded.
func TestCloseIsBoundedWhenStderrOutlivesTheGroup(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "engine")
	body := `#!/bin/sh
setsid sh -c 'echo $$ > ` + dir + `/helper; exec sleep 15' &
while read -r l; do
  case "$l" in
    uci) echo uciok ;;
    isready) echo readyok ;;
    quit) exit 0 ;;
  esac
done
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b, _ := os.ReadFile(filepath.Join(dir, "helper"))
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Start(ctx, script)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- c.Close() }()
	select {
	case <-done:
	case <-time.After(6 * time.Second):
		t.Fatalf("Close of an engine that quit at once, a helper of its wrapper (own session) holding its stderr: still blocked after %v (cmd.Wait waits for the stderr copy; the 2 s group kill cannot reach the helper)", time.Since(start).Round(time.Millisecond))
	}
}
