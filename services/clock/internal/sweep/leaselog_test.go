package sweep

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/palacehq/palace/pkg/apptest"
	"github.com/palacehq/palace/pkg/deadline"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestLeasesTakenAndLostTogetherAreOneLine: a replica takes its shards
// together at start and, starved or cut off, loses them together: one
// line names them all each time, where a line per shard (16 by default)
// buried the log at every lapse.
func TestLeasesTakenAndLostTogetherAreOneLine(t *testing.T) {
	rdb := redistest.Client(t)
	idx, err := deadline.New(rdb, redistest.Prefix(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	out := &apptest.LogBuffer{}
	s, err := New(slog.New(slog.NewJSONHandler(out, nil)), rdb, idx, nil, noop.NewMeterProvider().Meter("test"), Config{ReplicaID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.tick(ctx)
	if got := len(s.Owned()); got != 4 {
		t.Fatalf("a lone replica holds %d shards after a tick, want 4", got)
	}
	for sh := range 4 {
		if err := rdb.Set(ctx, s.keys.lease(sh), "another", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s.tick(ctx)
	lines := map[string][]int{}
	for line := range strings.Lines(out.String()) {
		var rec struct {
			Msg    string
			Shards []int
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(rec.Msg, "lease") {
			if _, twice := lines[rec.Msg]; twice {
				t.Fatalf("%q written more than once:\n%s", rec.Msg, out.String())
			}
			lines[rec.Msg] = rec.Shards
		}
	}
	for _, msg := range []string{"took the leases of shards", "lost the leases of shards"} {
		if got := lines[msg]; len(got) != 4 {
			t.Fatalf("%q names shards %v, want all 4:\n%s", msg, got, out.String())
		}
	}
}
