package store

import (
	"strings"
	"testing"
	"time"
)

// FuzzParsePool: a pool id, read back from a queue's index or a ticket,
// parses only to a pool whose id is the canonical one, and that id reads
// back as the same pool: two spellings of one pool would be two queues
// whose players never meet.
func FuzzParsePool(f *testing.F) {
	for _, s := range []string{"janggi/5m+3x30s/rated", "xiangqi/10m+5s/casual", "janggi/none/casual", "janggi/3x30s/rated", "xiangqi/90S/casual", "janggi//", "a/b/c/d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		p, err := ParsePool(id)
		if err != nil {
			return
		}
		back, err := ParsePool(p.ID())
		if err != nil || back != p {
			t.Fatalf("%q parsed as %+v, whose id %q reads as %+v, %v", id, p, p.ID(), back, err)
		}
		if strings.Count(p.ID(), "/") != 2 {
			t.Fatalf("%q parsed as %+v, whose id %q has more parts", id, p, p.ID())
		}
	})
}

// FuzzDecodeEntry: an entry of a player's game list, as stored by this or
// another release, decodes without panicking, and an entry this release
// encodes decodes to itself.
func FuzzDecodeEntry(f *testing.F) {
	f.Add("1|first|1|5m+3x30s|1700000000000|p2|Kim|with|bars", "Kim")
	f.Add("2|second|0|none|-1||", "")
	f.Add("x|||||", "a|b")
	f.Fuzz(func(t *testing.T, raw, name string) {
		if e, err := decodeEntry("g", raw); err == nil {
			back, err := decodeEntry("g", e.encode())
			if err != nil {
				t.Fatalf("%q decoded as %+v, which encodes as %q that does not decode: %v", raw, e, e.encode(), err)
			}
			if back.Control != e.Control || back.Kind != e.Kind || back.Side != e.Side || back.Rated != e.Rated || !back.Created.Equal(e.Created) || back.Opponent != e.Opponent || back.OpponentName != e.OpponentName {
				t.Fatalf("%q decoded as %+v, re-encoded as %+v", raw, e, back)
			}
		}
		e := Entry{Game: "g", Kind: 1, Side: "first", Rated: true, Created: time.UnixMilli(1_700_000_000_000), Opponent: "p2", OpponentName: name}
		back, err := decodeEntry("g", e.encode())
		if err != nil || back.OpponentName != name || back.Control != e.Control || !back.Created.Equal(e.Created) {
			t.Fatalf("entry %+v encoded as %q decodes as %+v, %v", e, e.encode(), back, err)
		}
	})
}
