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

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/apptest"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/ai"
	"github.com/palacehq/palace/services/game"
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

// TestAnEnginesNewGameComesOutOfItsMovetime: before each move the worker
// sends an external engine ucinewgame and waits for its readyok, which an
// engine clearing a large hash table takes hundreds of milliseconds to
// give. The movetime was fixed before that wait, which came on top of it,
// on the AI's clock (a loss on time in a short byo-yomi period); the
// movetime is what is left after it.
func TestAnEnginesNewGameComesOutOfItsMovetime(t *testing.T) {
	const delay = 700 * time.Millisecond
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gos, script := filepath.Join(dir, "go"), filepath.Join(dir, "engine")
	body := fmt.Sprintf("#!/bin/bash\nwhile IFS= read -r line; do case \"$line\" in ucinewgame) sleep %.3f;; go*) printf '%%s\\n' \"$line\" >> %q;; esac; printf '%%s\\n' \"$line\"; done | PALACE_TEST_UCI_ENGINE=1 exec %q\n",
		delay.Seconds(), gos, self)
	writeScript(t, script, body)

	prefix := redistest.Prefix(t)
	gcfg := game.DefaultConfig()
	gcfg.KeyPrefix = prefix
	acfg := aiConfig(prefix, 1)
	acfg.UCIEngine = script
	cc := apptest.Start(t, redistest.Addr(t), game.Bind(gcfg), ai.Bind(acfg))
	// The AI's first move is given half the time to its first-move
	// deadline, 0.8 s, less than an engine's own default (1 s).
	const firstMove = 1600 * time.Millisecond
	g := createAIGame(t, gamev1.NewGameServiceClient(cc), &gamev1.CreateGameRequest{
		RequestId: prefix + "create", Kind: commonv1.GameKind_GAME_KIND_XIANGQI, FirstMoveTime: durationpb.New(firstMove),
		TimeControl: &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(time.Minute)}}},
		Seats:       []*gamev1.Seat{{Side: commonv1.Side_SIDE_FIRST, PlayerId: "human"}, {Side: commonv1.Side_SIDE_SECOND, AiLevel: 10}},
	})
	g.play(t, 1)

	b, err := os.ReadFile(gos)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 3 || f[1] != "movetime" {
		t.Fatalf("the engine was sent %q, want one go movetime", b)
	}
	ms, err := strconv.Atoi(f[2])
	if err != nil {
		t.Fatal(err)
	}
	if most := firstMove/2 - delay + 150*time.Millisecond; time.Duration(ms)*time.Millisecond > most {
		t.Fatalf("movetime %d ms after a ucinewgame of %v, out of a budget of %v: want at most %v", ms, delay, firstMove/2, most)
	}
}
