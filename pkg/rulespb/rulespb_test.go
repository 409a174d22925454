package rulespb_test

import (
	"strings"
	"testing"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/pkg/rulespb"
)

// Method and Winner are plain casts, and services store the rules' names:
// both hold only while the rules' values and names follow the proto enums.
func TestMethodAndWinnerFollowTheProto(t *testing.T) {
	if got := rulespb.Method(rules.None); got != commonv1.EndMethod_END_METHOD_UNSPECIFIED {
		t.Errorf("Method(None) = %v, want END_METHOD_UNSPECIFIED", got)
	}
	for m := rules.Checkmate; m <= rules.Agreement; m++ {
		if got, want := rulespb.Method(m).String(), "END_METHOD_"+strings.ToUpper(m.String()); got != want {
			t.Errorf("Method(%q) = %v, want %v", m, got, want)
		}
	}
	if got := rulespb.Winner(rules.NoWinner); got != commonv1.Winner_WINNER_UNSPECIFIED {
		t.Errorf("Winner(NoWinner) = %v, want WINNER_UNSPECIFIED", got)
	}
	for _, w := range []rules.Winner{rules.FirstWins, rules.SecondWins, rules.Draw} {
		if got, want := rulespb.Winner(w).String(), "WINNER_"+strings.ToUpper(w.String()); got != want {
			t.Errorf("Winner(%q) = %v, want %v", w, got, want)
		}
	}
}
