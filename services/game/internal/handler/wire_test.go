package handler

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/game/internal/store"
)

func TestWireFieldNumbersMatchTheAPI(t *testing.T) {
	for _, c := range []struct {
		msg   proto.Message
		field protoreflect.Name
		want  int
	}{
		{&gamev1.Event{}, "version", eventVersionField},
		{&gamev1.Event{}, "game_ended", eventGameEndedField},
		{&gamev1.StreamEventsResponse{}, "event", streamEventsEventField},
	} {
		f := c.msg.ProtoReflect().Descriptor().Fields().ByName(c.field)
		if f == nil || int(f.Number()) != c.want {
			t.Errorf("%s.%s: %v, want number %d", c.msg.ProtoReflect().Descriptor().Name(), c.field, f, c.want)
		}
	}
	kind := (&gamev1.Event{}).ProtoReflect().Descriptor().Oneofs().ByName("kind").Fields()
	if n := kind.Len(); n != eventKindLastField-eventKindFirstField+1 {
		t.Errorf("Event.kind has %d fields, want %d to %d", n, eventKindFirstField, eventKindLastField)
	}
	for i := range kind.Len() {
		if f := kind.Get(i); f.Number() < eventKindFirstField || f.Number() > eventKindLastField || f.Kind() != protoreflect.MessageKind {
			t.Errorf("Event.kind's %s: number %d, %v; want a message numbered %d to %d", f.Name(), f.Number(), f.Kind(), eventKindFirstField, eventKindLastField)
		}
	}
}

func TestStreamEventIsTheResponseAroundTheEvent(t *testing.T) {
	for _, e := range []*gamev1.Event{
		{Version: 7, Kind: &gamev1.Event_MovePlayed{MovePlayed: &gamev1.MoveRecord{Ply: 3, Move: &commonv1.Move{Coordinate: "h3e3"}, Notation: "C2.5"}}},
		{Version: 1 << 40, Kind: &gamev1.Event_GameEnded{GameEnded: &gamev1.GameEnded{}}},
		{Version: 1},
	} {
		raw, err := proto.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := streamEvent(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != e.GetVersion() || got.Ended != (e.GetGameEnded() != nil) {
			t.Errorf("%v: version %d ended %v", e, got.Version, got.Ended)
		}
		var resp gamev1.StreamEventsResponse
		if err := proto.Unmarshal(got.Msg.Bytes(), &resp); err != nil || !proto.Equal(resp.GetEvent(), e) {
			t.Errorf("%v: sent %v, %v", e, &resp, err)
		}
	}
	// The kind is the last of its fields, of the wire type a decoder
	// reads: a game_ended followed by a move is a move, and a varint
	// numbered like game_ended is an unknown field.
	ended, _ := proto.Marshal(&gamev1.Event{Version: 3, Kind: &gamev1.Event_GameEnded{GameEnded: &gamev1.GameEnded{}}})
	moved, _ := proto.Marshal(&gamev1.Event{Kind: &gamev1.Event_MovePlayed{MovePlayed: &gamev1.MoveRecord{Ply: 1}}})
	for _, c := range []struct {
		raw   []byte
		ended bool
	}{
		{slices.Concat(ended, moved), false},
		{slices.Concat(moved, ended), true},
		{[]byte{0x98, 0x01, 0x00}, false},
	} {
		got, err := streamEvent(c.raw)
		if err != nil || got.Ended != c.ended {
			t.Errorf("%x: ended %v, %v; want %v", c.raw, got.Ended, err, c.ended)
		}
	}
	for _, bad := range [][]byte{{0x08}, {0x08, 0x80}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}} {
		if _, err := streamEvent(bad); err == nil {
			t.Errorf("%x: no error", bad)
		}
	}
}

func FuzzStreamEvent(f *testing.F) {
	raw, _ := proto.Marshal(&gamev1.Event{Version: 5, Kind: &gamev1.Event_GameEnded{GameEnded: &gamev1.GameEnded{}}})
	f.Add(raw)
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := streamEvent(b)
		if err != nil {
			return
		}
		// What the scan accepts is well-formed at the top level, so the
		// response around it is too; where it decodes, the scan read the
		// version and the ending the client reads.
		var resp gamev1.StreamEventsResponse
		if proto.Unmarshal(e.Msg.Bytes(), &resp) != nil {
			return
		}
		if got := resp.GetEvent(); got.GetVersion() != e.Version || (got.GetGameEnded() != nil) != e.Ended {
			t.Fatalf("scanned version %d ended %v, decoded %v", e.Version, e.Ended, got)
		}
	})
}

// TestStreamEventReadsAndStripsItsCommitsMarks: the stamps a commit puts
// on its events in the log are read into the event; a client gets the
// event with its commit's stamp (Event.commit, which it resumes after),
// and never the stamp of the commit before.
func TestStreamEventReadsAndStripsItsCommitsMarks(t *testing.T) {
	e := &gamev1.Event{Version: 5, Kind: &gamev1.Event_MovePlayed{MovePlayed: &gamev1.MoveRecord{Ply: 3, Move: &commonv1.Move{Coordinate: "b1c3"}}}}
	raw, err := proto.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		stamp, after string
		first        bool
		wantAfter    string
	}{
		{"s5", "s4", true, "s4"}, // a commit's first event
		{"s5", "", true, ""},     // the first after a commit that was not known
		{"s5", "", false, "s5"},  // a later one of the same commit
	} {
		got, err := streamEvent(store.MarkEvent(slices.Clone(raw), c.stamp, c.after, c.first))
		if err != nil {
			t.Fatal(err)
		}
		if got.Stamp != c.stamp || got.After != c.wantAfter {
			t.Errorf("marked %q after %q: read stamp %q after %q, want %q after %q", c.stamp, c.after, got.Stamp, got.After, c.stamp, c.wantAfter)
		}
		want := proto.CloneOf(e)
		want.Commit = c.stamp
		var resp gamev1.StreamEventsResponse
		if err := proto.Unmarshal(got.Msg.Bytes(), &resp); err != nil || !proto.Equal(resp.GetEvent(), want) {
			t.Errorf("sent %v, %v; want %v", &resp, err, want)
		}
		if len(resp.GetEvent().ProtoReflect().GetUnknown()) != 0 {
			t.Errorf("sent the commit's marks to the client: %x", resp.GetEvent().ProtoReflect().GetUnknown())
		}
	}
	// Unmarked events, logged before commits marked them, are known by
	// nothing but their version.
	if got, err := streamEvent(raw); err != nil || got.Stamp != "" || got.After != "" {
		t.Errorf("an unmarked event: stamp %q after %q, %v", got.Stamp, got.After, err)
	}
	// The stamp before the commit's comes last: a field after it is
	// damage, which would be sent cut.
	for name, bad := range map[string][]byte{
		"a public field": append(store.MarkEvent(slices.Clone(raw), "s5", "s4", true), raw...),
		"a stamp":        store.MarkEvent(store.MarkEvent(slices.Clone(raw), "s5", "s4", true), "s6", "", false),
	} {
		if _, err := streamEvent(bad); err == nil {
			t.Errorf("an event with %s after its commit's marks was read", name)
		}
	}
	// The commit's own stamp may come anywhere, as a marshalled Event with
	// its commit set places it (before the kind, a oneof).
	withCommit := proto.CloneOf(e)
	withCommit.Commit = "s5"
	b, err := proto.Marshal(withCommit)
	if err != nil {
		t.Fatal(err)
	}
	var resp gamev1.StreamEventsResponse
	if got, err := streamEvent(b); err != nil || got.Stamp != "s5" || got.After != "s5" ||
		proto.Unmarshal(got.Msg.Bytes(), &resp) != nil || !proto.Equal(resp.GetEvent(), withCommit) {
		t.Errorf("an event marshalled with its commit: read stamp %q after %q, sent %v, %v; want %v", got.Stamp, got.After, &resp, err, withCommit)
	}
}
