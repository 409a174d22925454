package main

import (
	"testing"

	"github.com/palacehq/palace/pkg/apptest"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestLoadtestGamesFailsWhenAKindPlaysNoMove: a server that ends every
// Janggi game as it creates it plays Xiangqi only. No counter can see it,
// so the run fails as one that tested nothing of Janggi.
func TestLoadtestGamesFailsWhenAKindPlaysNoMove(t *testing.T) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	f := resignAtCreation(commonv1.GameKind_GAME_KIND_JANGGI)
	addr := startFaultyProxy(t, upstream, f)
	out, errOut, code := palace("loadtest", "games", "--addr", addr, "--games", "4", "--duration", "1500ms",
		"--floor=false", "--service-keys", apptest.ServiceKeys)
	var rep gamesReport
	lastJSON(t, out, &rep)
	t.Logf("%d Janggi games ended at creation; report %+v", f.injected.Load(), rep)
	if f.injected.Load() == 0 || rep.JanggiGames == 0 || rep.XiangqiMoves == 0 {
		t.Fatalf("the scenario did not happen\n%s", errOut)
	}
	if rep.JanggiMoves == 0 && code != exitFail {
		t.Fatalf("not one Janggi move played in %d Janggi games: exit %d, want %d (nothing of Janggi was tested)\n%s",
			rep.JanggiGames, code, exitFail, errOut)
	}
}
