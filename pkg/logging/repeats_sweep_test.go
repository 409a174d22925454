package logging

import (
	"bytes"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
)

// deploy/README.md (PALACE_LOG_FORMAT / PALACE_LOG_LEVEL): a warning
// identical to one written in the last 10 s "is counted, not written: the
// next one after that carries repeated=N". When the process also logged
// more than 1024 distinct warnings (a big outage, one per shard, pool or
// peer), the sweep of past keys dropped the key of a warning together with
// the count of its left-out repeats, so the next one was written as if it
// had never repeated.
func TestASweepKeepsTheCountOfLeftOutRepeats(t *testing.T) {
	var out bytes.Buffer
	h := QuietRepeats(slog.NewTextHandler(&out, nil)).(repeatHandler)
	now := time.Unix(1_700_000_000, 0)
	h.seen.now = func() time.Time { return now }
	log := slog.New(h)
	down := errors.New("dial tcp 10.0.0.7:6379: connect: connection refused")
	for range 101 {
		log.Warn("redis client", "err", down)
	}
	for i := range 1100 {
		log.Warn("a warning of its own", "n", strconv.Itoa(i))
	}
	// Past the window: the next distinct warning sweeps the keys of the
	// window gone by.
	now = now.Add(repeatWindow + time.Second)
	log.Warn("another")
	out.Reset()
	log.Warn("redis client", "err", down)
	if !strings.Contains(out.String(), "repeated=100") {
		t.Fatalf("the warning after 100 left-out repeats was written as %q, want it to carry repeated=100", strings.TrimSpace(out.String()))
	}
}
