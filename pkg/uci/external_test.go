package uci

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/palacehq/palace/pkg/engine"
	"github.com/palacehq/palace/pkg/rules"
)

// TestMatchExternalEngine plays a built-in level against an external UCI
// engine such as Fairy-Stockfish, when one is named:
//
//	PALACE_UCI_ENGINE=/usr/games/fairy-stockfish PALACE_UCI_VARIANT=janggi \
//	PALACE_UCI_LEVEL=8 PALACE_UCI_NODES=20000 PALACE_UCI_GAMES=4 \
//	go test ./uci -run MatchExternalEngine -v -timeout 1h
//
// It measures strength and checks the client against a real binary; it is
// skipped by default, since the binary is not part of the project.
func TestMatchExternalEngine(t *testing.T) {
	path := os.Getenv("PALACE_UCI_ENGINE")
	if path == "" {
		t.Skip("PALACE_UCI_ENGINE not set")
	}
	v, err := rules.ParseVariant(envOr("PALACE_UCI_VARIANT", "xiangqi"))
	if err != nil {
		t.Fatal(err)
	}
	level, _ := strconv.Atoi(envOr("PALACE_UCI_LEVEL", "8"))
	nodes, _ := strconv.Atoi(envOr("PALACE_UCI_NODES", "20000"))
	games, _ := strconv.Atoi(envOr("PALACE_UCI_GAMES", "2"))
	ctx := context.Background()
	ext, err := Start(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ext.Close()
	ext.Go = GoParams{Nodes: uint64(nodes)}
	ext.Label = ext.Name() + " nodes " + strconv.Itoa(nodes)
	p := engine.NewLevelPlayer(level, 5, 32)
	res, err := engine.Match(ctx, p, ext, games, v, engine.RandomOpenings(v, games, 4, 99), engine.DefaultAdjudication(), func(rec engine.GameRecord, r engine.MatchResult) {
		t.Logf("game %d: %s - %s: %v in %d plies %s", rec.Index, rec.First, rec.Second, rec.Outcome, len(rec.Moves), rec.Note)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range res.Records {
		if rec.Note != "" {
			t.Errorf("game %d: %s", rec.Index, rec.Note)
		}
	}
	t.Logf("%v: %s vs %s: +%d =%d -%d, score %.3f, Elo %+.0f [%+.0f, %+.0f]",
		v, p.Name(), ext.Name(), res.Wins, res.Draws, res.Losses, res.Score, res.Elo, res.EloLow, res.EloHigh)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
