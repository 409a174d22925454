package rules

import "testing"

// Hashes may be stored, so the keys must not change between versions.
func TestZobristKeysPinned(t *testing.T) {
	if zobristSide != 0x61acb15625941cec {
		t.Errorf("side key %#x changed", zobristSide)
	}
	for v, want := range map[Variant]uint64{Janggi: 0x1537a5c72c632c4e, Xiangqi: 0xc2961f0f19dfb1bc} {
		if got := mustFEN(t, v, StartFEN(v)).Hash(); got != want {
			t.Errorf("%v start position hash %#x, want %#x", v, got, want)
		}
	}
}
