package engine

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/palacehq/palace/pkg/rules"
)

// TestMeasureLevels plays two built-in levels against each other when asked
// to, for checking that the levels are ordered:
//
//	PALACE_LEVEL_MATCH=6,4 PALACE_LEVEL_GAMES=10 PALACE_LEVEL_VARIANT=janggi \
//	go test ./engine -run MeasureLevels -v -timeout 1h
//
// Skipped by default: a useful match takes minutes.
func TestMeasureLevels(t *testing.T) {
	spec := os.Getenv("PALACE_LEVEL_MATCH")
	if spec == "" {
		t.Skip("PALACE_LEVEL_MATCH not set")
	}
	x, y, _ := strings.Cut(spec, ",")
	la, errA := strconv.Atoi(x)
	lb, errB := strconv.Atoi(y)
	if errA != nil || errB != nil {
		t.Fatalf("PALACE_LEVEL_MATCH=%q: want e.g. 6,4", spec)
	}
	games, err := strconv.Atoi(os.Getenv("PALACE_LEVEL_GAMES"))
	if err != nil || games <= 0 {
		games = 10
	}
	v := rules.Xiangqi
	if s := os.Getenv("PALACE_LEVEL_VARIANT"); s != "" {
		if v, err = rules.ParseVariant(s); err != nil {
			t.Fatal(err)
		}
	}
	a, b := NewLevelPlayer(la, 1, 16), NewLevelPlayer(lb, 2, 16)
	res, err := Match(context.Background(), a, b, games, v, RandomOpenings(v, games/2+1, 4, 77), DefaultAdjudication(), func(rec GameRecord, r MatchResult) {
		t.Logf("game %d: %s - %s: %v in %d plies %s", rec.Index, rec.First, rec.Second, rec.Outcome, len(rec.Moves), rec.Note)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: level %d vs level %d: +%d =%d -%d, score %.3f, Elo %+.0f [%+.0f, %+.0f]",
		v, la, lb, res.Wins, res.Draws, res.Losses, res.Score, res.Elo, res.EloLow, res.EloHigh)
}
