package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/palacehq/palace/pkg/rules"
)

func TestIncrementalState(t *testing.T) {
	for _, v := range []rules.Variant{rules.Xiangqi, rules.Janggi} {
		rng := rand.New(rand.NewPCG(11, uint64(v)))
		s := newSearcher()
		if err := s.setup(mustFEN(t, v, rules.StartFEN(v)), nil); err != nil {
			t.Fatal(err)
		}
		for game := 0; game < 20; game++ {
			depth := 0
			for ; depth < 60; depth++ {
				moves := s.pos.LegalMoves(nil)
				if len(moves) == 0 {
					break
				}
				if rng.IntN(8) == 0 && !s.top().check {
					s.makeNull(depth)
				} else {
					s.make(moves[rng.IntN(len(moves))], depth)
				}
				checkIncremental(t, s)
			}
			for depth--; depth >= 0; depth-- {
				s.unmake(depth)
				checkIncremental(t, s)
			}
		}
	}
}
