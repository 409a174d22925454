package game_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/services/game/gametest"
)

// withStaleHead rewrites game id's hash as a writer that marks its events
// but knows nothing of the log's head would leave it: field h keeps the
// stamp of an earlier commit (h), and the stored state carries no
// LogStamp.
func withStaleHead(t *testing.T, env *gametest.Env, id, h string) {
	t.Helper()
	editStored(t, env, id, func(st map[string]any) string {
		delete(st, "lstamp")
		return ""
	})
	key := env.Config.KeyPrefix + "{g:" + id + "}"
	if err := env.Redis.HSet(context.Background(), key, "h", h).Err(); err != nil {
		t.Fatal(err)
	}
}

// hashField reads field f of game id's hash.
func hashField(t *testing.T, env *gametest.Env, id, f string) string {
	t.Helper()
	v, err := env.Redis.HGet(context.Background(), env.Config.KeyPrefix+"{g:"+id+"}", f).Result()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestAStaleHeadDoesNotEndAHealthyStream: the game's head field (h, the
// stamp of the last commit that logged events) names an earlier commit than
// the stream's last event, as a writer that does not keep the field leaves
// it. The heartbeat's look at the game does not take that for a history
// Redis lost: the log's event at the version sent decides, and it is the
// one the stream sent.
func TestAStaleHeadDoesNotEndAHealthyStream(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := xiangqi(t, env)
	tb.move(t, "h3e3")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs, err := followEvents(ctx, env, tb.id)
	if err != nil {
		t.Fatal(err)
	}
	version := tb.get(t).GetVersion()
	for v := uint64(1); v <= version; v++ {
		if s := <-evs; s.err != nil {
			t.Fatalf("catching up: %v", s.err)
		}
	}
	before := hashField(t, env, tb.id, "h")
	tb.move(t, "h10g8")
	withStaleHead(t, env, tb.id, before)
	after := tb.get(t).GetVersion()
	// Several heartbeats (200 ms in gametest).
	deadline := time.After(2 * time.Second)
	for got := version; ; {
		select {
		case s := <-evs:
			if s.err != nil {
				t.Fatalf("a healthy stream ended with %v (OutOfRange: %v) with the head field stale (version %d of %d sent)",
					s.err, status.Code(s.err) == codes.OutOfRange, got, after)
			}
			got = s.ev.GetVersion()
		case <-deadline:
			if got != after {
				t.Fatalf("the stream sent up to version %d, the game is at %d", got, after)
			}
			return
		}
	}
}
