package logging

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// JSON logs write durations as text ("1.5s"), as text logs do, not as
// integer nanoseconds.
func TestJSONDurationsAreReadable(t *testing.T) {
	var buf bytes.Buffer
	New(&buf, "json", "info").Info("waited", "waited", 1500*time.Millisecond)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["waited"] != "1.5s" {
		t.Fatalf("waited = %v (%T), want %q", rec["waited"], rec["waited"], "1.5s")
	}
}
