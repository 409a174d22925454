//go:build unix

package app_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/app"
)

// TestSignalContextStopsAtOnceOnASecondSignal: the first SIGTERM cancels
// the context and the process drains; a second one ends it at once,
// where it was swallowed and the drain ran to its timeout.
func TestSignalContextStopsAtOnceOnASecondSignal(t *testing.T) {
	if os.Getenv("PALACE_TEST_SIGNAL_CHILD") == "1" {
		ctx, stop := app.SignalContext()
		defer stop()
		fmt.Println("ready")
		<-ctx.Done()
		fmt.Println("draining")
		time.Sleep(30 * time.Second) // a drain that will not end by itself
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSignalContextStopsAtOnceOnASecondSignal$")
	cmd.Env = append(os.Environ(), "PALACE_TEST_SIGNAL_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := bufio.NewScanner(out)
	await := func(want string) {
		t.Helper()
		for lines.Scan() {
			if strings.TrimSpace(lines.Text()) == want {
				return
			}
		}
		t.Fatalf("the child never said %q", want)
	}
	await("ready")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await("draining")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() {
			t.Fatalf("the child ended with %v; want killed by the second signal", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a second SIGTERM did not end the process: it waited out its drain")
	}
}
