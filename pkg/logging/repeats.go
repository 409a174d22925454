package logging

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// During an outage every call, retry and heartbeat warns of the same
// thing: hundreds of identical lines a second, which bury the few that
// say what happened ("redis out of reach", "redis answers again"). So a
// warning or error identical to one logged less than a window ago (but for
// its volatile attributes, and its error's wrapping) is counted instead of
// written; the first one after the window carries the count, as
// repeated=N. Records below warn level are all written.

// repeatWindow is how long identical warnings are counted, not written.
const repeatWindow = 10 * time.Second

// repeatOwed is how long the count of a warning's left-out repeats waits
// for the next one to carry it.
const repeatOwed = time.Hour

// volatile attributes differ between records that tell of one thing: a
// full or stalled Redis fails a command of every game, each its own
// record, and written once per game a window they flooded the log.
var volatile = map[string]bool{
	"duration_ms": true, "trace_id": true, "span_id": true, "waited": true,
	"game": true, "match": true, "player": true, "invite": true,
}

// identity is what attribute a adds to the identity of its record (ok is
// false for none). An error counts by its cause, the innermost error it
// wraps: the rest names the game, ticket or connection it befell ("commit
// game X: OOM command not allowed ...").
func identity(a slog.Attr) (string, bool) {
	if volatile[a.Key] {
		return "", false
	}
	v := a.Value.Resolve()
	if v.Kind() == slog.KindDuration {
		// A wait or a backoff ("retry_in"), which grows from one record
		// to the next of one failure.
		return "", false
	}
	if v.Kind() == slog.KindAny {
		if err, ok := v.Any().(error); ok && err != nil {
			return a.Key + "=" + strings.Join(causes(err), "; "), true
		}
	}
	return a.String(), true
}

// causes are the distinct innermost errors err wraps, in order: errors
// joined (one a shard, say, in the order they came) count by the set of
// their causes.
func causes(err error) []string {
	for {
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			var all []string
			for _, e := range joined.Unwrap() {
				if e != nil {
					all = append(all, causes(e)...)
				}
			}
			slices.Sort(all)
			return slices.Compact(all)
		}
		next := errors.Unwrap(err)
		if next == nil {
			return []string{err.Error()}
		}
		err = next
	}
}

// QuietRepeats wraps h so that identical warnings and errors are written
// at most once a window, each with the count of those left out since.
func QuietRepeats(h slog.Handler) slog.Handler {
	return repeatHandler{h: h, seen: &repeats{last: map[string]*repeat{}, now: time.Now}}
}

type repeats struct {
	mu   sync.Mutex
	last map[string]*repeat
	now  func() time.Time
	// swept is when keys long past were last dropped.
	swept time.Time
}

type repeat struct {
	at      time.Time
	skipped int
}

// pass reports whether a record keyed key is written now, and how many
// identical ones were left out before it.
func (r *repeats) pass(key string) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if p := r.last[key]; p != nil && now.Sub(p.at) < repeatWindow {
		p.skipped++
		return false, 0
	}
	skipped := 0
	if p := r.last[key]; p != nil {
		skipped = p.skipped
	}
	if len(r.last) > 1024 && now.Sub(r.swept) >= repeatWindow {
		// Keys of records long past: dropped, or a process logging many
		// distinct warnings would hold all of them. At most once a
		// window: an outage that has a process warn once per game fills
		// the map with keys of the window, and scanning them all at each
		// warning, under the lock every warning takes, cost seconds.
		r.swept = now
		for k, p := range r.last {
			// One whose repeats were left out keeps its count for its next
			// record to carry, an hour at most.
			if age := now.Sub(p.at); age >= repeatWindow && (p.skipped == 0 || age >= repeatOwed) {
				delete(r.last, k)
			}
		}
	}
	r.last[key] = &repeat{at: now}
	return true, skipped
}

type repeatHandler struct {
	h      slog.Handler
	seen   *repeats
	prefix string // the attributes and groups this handler adds, as text
}

func (r repeatHandler) Enabled(ctx context.Context, l slog.Level) bool { return r.h.Enabled(ctx, l) }

func (r repeatHandler) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level < slog.LevelWarn {
		return r.h.Handle(ctx, rec)
	}
	var b strings.Builder
	b.WriteString(r.prefix)
	b.WriteString(rec.Level.String())
	b.WriteByte('|')
	b.WriteString(rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		if id, ok := identity(a); ok {
			b.WriteByte('|')
			b.WriteString(id)
		}
		return true
	})
	ok, skipped := r.seen.pass(b.String())
	if !ok {
		return nil
	}
	if skipped > 0 {
		rec = rec.Clone()
		rec.AddAttrs(slog.Int("repeated", skipped))
	}
	return r.h.Handle(ctx, rec)
}

func (r repeatHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(r.prefix)
	for _, a := range as {
		if id, ok := identity(a); ok {
			b.WriteString(id)
			b.WriteByte('|')
		}
	}
	return repeatHandler{h: r.h.WithAttrs(as), seen: r.seen, prefix: b.String()}
}

func (r repeatHandler) WithGroup(name string) slog.Handler {
	return repeatHandler{h: r.h.WithGroup(name), seen: r.seen, prefix: r.prefix + name + "."}
}
