package model

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/rules"
)

// TestLegalMovesInTextOrder plays random games of both kinds and checks,
// in every position, that the answer lists exactly the legal moves, sorted
// by their text, passes included.
func TestLegalMovesInTextOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, v := range []rules.Variant{rules.Xiangqi, rules.Janggi} {
		pos, err := rules.ParseFEN(v, rules.StartFEN(v))
		if err != nil {
			t.Fatal(err)
		}
		for ply := 0; ply < 120; ply++ {
			ms := pos.LegalMoves(nil)
			if len(ms) == 0 {
				break
			}
			var want []string
			for _, m := range ms {
				want = append(want, m.String())
			}
			slices.Sort(want)
			var got []string
			for _, pb := range legalMovesPB(ms) {
				got = append(got, pb.GetCoordinate())
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%v ply %d: got %v, want %v", v, ply, got, want)
			}
			pos.Make(ms[rng.IntN(len(ms))])
		}
	}
}

// TestSharedLegalMovesMarshalConcurrently marshals answers sharing the same
// move messages from many goroutines at once (run with -race) and checks
// that every encoding holds the moves and that the shared messages are
// unchanged.
func TestSharedLegalMovesMarshalConcurrently(t *testing.T) {
	pos, err := rules.ParseFEN(rules.Xiangqi, rules.StartFEN(rules.Xiangqi))
	if err != nil {
		t.Fatal(err)
	}
	ms := pos.LegalMoves(nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				list := legalMovesPB(ms)
				for _, m := range list {
					b, err := proto.Marshal(m)
					if err != nil {
						t.Error(err)
						return
					}
					var back commonv1.Move
					if err := proto.Unmarshal(b, &back); err != nil || back.GetCoordinate() != m.GetCoordinate() {
						t.Errorf("round trip of %q: %q, %v", m.GetCoordinate(), back.GetCoordinate(), err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for k, m := range moveMessages().msg {
		from, to := rules.Square(k/rules.NumSquares), rules.Square(k%rules.NumSquares)
		if want := rules.NewMove(from, to).String(); m.GetCoordinate() != want {
			t.Fatalf("shared message %d is %q, want %q", k, m.GetCoordinate(), want)
		}
	}
}
