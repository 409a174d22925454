package engine

import "github.com/palacehq/palace/pkg/rules"

const (
	boundUpper = 1
	boundLower = 2
	boundExact = boundUpper | boundLower
)

// ttEntry is 16 bytes, so a bucket of two fills half a cache line.
type ttEntry struct {
	key   uint64
	move  rules.Move
	score int16
	eval  int16
	depth int8
	// gen<<2 | bound: the search generation lets old entries be replaced
	// first without clearing the table between moves.
	genBound uint8
}

// ttBucket pairs a depth-preferred slot with an always-replace slot: deep
// results survive, and recent shallow ones still find a home.
type ttBucket [2]ttEntry

type table struct {
	buckets []ttBucket
	mask    uint64
	gen     uint8
	// salt is mixed into the stored keys (not the index): a new salt
	// forgets every entry at once, where zeroing the table takes a pass
	// over all of it, longer than a short search (see clear).
	salt uint64
	// live counts the generations whose entries may be in the table, of
	// the current salt or not, the current one included.
	live int
	// staleGens, when not 0, counts the generations before clearGen (the
	// generation the last salt change began) that hold entries of an
	// earlier salt.
	staleGens int
	clearGen  uint8
}

func newTable(mb int) *table {
	if mb < 1 {
		mb = 1
	}
	n := uint64(mb) << 20 / 32
	// round down to a power of two so the index is a mask
	size := uint64(1)
	for size*2 <= n {
		size *= 2
	}
	return &table{buckets: make([]ttBucket, size), mask: size - 1, live: 1}
}

// clear forgets every entry. Searches after it must play exactly as on a
// new table (equal seeds, equal answers), and they do: an entry of an
// earlier salt never matches a key, and, being of an earlier generation,
// it is replaced first, just as an empty slot is. That holds while no
// search runs in the generation of such an entry, so such entries are
// dropped before the generations wrap onto theirs (newSearch).
func (t *table) clear() {
	// Every generation that may hold entries becomes stale: this salt's,
	// and those of earlier salts not dropped yet, just before them.
	stale := t.live + t.staleGens
	if stale >= 32 {
		t.zero()
		return
	}
	t.salt = t.salt*6364136223846793005 + 1442695040888963407
	// A generation of its own, so no old entry is of the current one even
	// before the next search begins.
	t.gen = (t.gen + 1) & 63
	t.staleGens, t.clearGen, t.live = stale, t.gen, 1
}

// zero empties the table for real.
func (t *table) zero() {
	clear(t.buckets)
	t.gen, t.live, t.staleGens = 0, 1, 0
}

// newSearch begins a generation: entries of earlier ones are replaced
// first, without clearing the table between moves.
func (t *table) newSearch() {
	if t.staleGens > 0 && t.staleGens+t.live >= 63 {
		t.dropStale()
	}
	t.gen = (t.gen + 1) & 63
	t.live++
}

// dropStale empties the slots of an earlier salt, found by generation, and
// keeps the current game's entries: a new table would have them too.
func (t *table) dropStale() {
	for i := range t.buckets {
		for j := range t.buckets[i] {
			e := &t.buckets[i][j]
			if back := (t.clearGen - e.genBound>>2) & 63; back >= 1 && int(back) <= t.staleGens {
				*e = ttEntry{}
			}
		}
	}
	t.staleGens = 0
}

func (t *table) probe(key uint64) (ttEntry, bool) {
	b := &t.buckets[key&t.mask]
	key ^= t.salt
	for i := range b {
		if b[i].key == key && b[i].genBound&3 != 0 {
			return b[i], true
		}
	}
	return ttEntry{}, false
}

func (t *table) store(key uint64, move rules.Move, score, eval, depth, bound int) {
	b := &t.buckets[key&t.mask]
	key ^= t.salt
	var e *ttEntry
	switch {
	case b[0].key == key:
		e = &b[0]
	case b[1].key == key:
		e = &b[1]
	case b[0].genBound&3 == 0 || b[0].genBound>>2 != t.gen || depth >= int(b[0].depth):
		b[1] = b[0] // the displaced deep entry gets the second chance
		e = &b[0]
	default:
		e = &b[1]
	}
	if move == rules.NoMove && e.key == key {
		move = e.move // keep the old best move rather than none
	}
	*e = ttEntry{key: key, move: move, score: int16(score), eval: int16(eval), depth: int8(depth), genBound: t.gen<<2 | uint8(bound)}
}

// hashfull is the permille of used slots among the first thousand buckets
// that belong to the current search, as UCI reports it.
func (t *table) hashfull() int {
	n := 0
	limit := min(500, len(t.buckets))
	for i := 0; i < limit; i++ {
		for j := range t.buckets[i] {
			e := &t.buckets[i][j]
			if e.genBound&3 != 0 && e.genBound>>2 == t.gen {
				n++
			}
		}
	}
	if limit == 0 {
		return 0
	}
	return n * 1000 / (2 * limit)
}

// Mate scores are stored relative to the node, not the root, so a hit at
// another distance from the root still reports the right distance.
func scoreToTT(v, ply int) int {
	switch {
	case v >= mateBound:
		return v + ply
	case v <= -mateBound:
		return v - ply
	}
	return v
}

func scoreFromTT(v, ply int) int {
	switch {
	case v >= mateBound:
		return v - ply
	case v <= -mateBound:
		return v + ply
	}
	return v
}
