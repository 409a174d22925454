package model

import (
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/rules"
)

// connected reads the one connection event of ch.
func connected(t *testing.T, ch Change) bool {
	t.Helper()
	if len(ch.Events) != 1 || ch.Events[0].GetPlayerConnection() == nil {
		t.Fatalf("want one connection event, got %v", ch.Events)
	}
	return ch.Events[0].GetPlayerConnection().GetConnected()
}

func TestHoldersMakeTheCount(t *testing.T) {
	ch, err := Create(CreateParams{ID: "g", Variant: rules.Xiangqi}, time.UnixMilli(1_700_000_000_000))
	if err != nil {
		t.Fatal(err)
	}
	st := ch.State
	ch, ok := Hold(st, rules.First, "p1")
	if !ok || !connected(t, ch) || ch.State.Connections[rules.First] != 1 {
		t.Fatalf("first hold: %v %+v", ok, ch.State)
	}
	st = ch.State
	if _, ok := Hold(st, rules.First, "p1"); ok {
		t.Fatal("holding again recorded a change")
	}
	// A second process holding a connected seat, and one of two letting
	// go, change who holds it, committed without an event: the seat was
	// and stays connected.
	ch, ok = Hold(st, rules.First, "p2")
	if !ok || len(ch.Events) != 0 || ch.State.Connections[rules.First] != 2 {
		t.Fatalf("a second hold: %v %v %+v", ok, ch.Events, ch.State)
	}
	st = ch.State
	ch, ok = LetGo(st, rules.First, "p1")
	if !ok || len(ch.Events) != 0 || ch.State.Connections[rules.First] != 1 || len(ch.State.Holders[rules.First]) != 1 {
		t.Fatalf("one of two let go: %v %v %+v", ok, ch.Events, ch.State)
	}
	st = ch.State
	if _, ok := LetGo(st, rules.First, "p1"); ok {
		t.Fatal("letting go twice recorded a change")
	}
	ch, _ = Hold(st, rules.Second, "p2")
	st = ch.State
	// p2 dies holding both seats.
	ch, ok = Release(st, "p2")
	if !ok || len(ch.Events) != 2 || ch.State.Connections != [2]int{} || len(ch.State.Holders[0])+len(ch.State.Holders[1]) != 0 {
		t.Fatalf("release: %v %v %+v", ok, ch.Events, ch.State)
	}
	for _, e := range ch.Events {
		if e.GetPlayerConnection().GetConnected() {
			t.Fatalf("release announced a connection: %v", e)
		}
	}
	if _, ok := Release(ch.State, "p2"); ok {
		t.Fatal("releasing twice recorded a change")
	}
	if st.Connections[rules.First] != 1 || st.Holders[rules.Second][0] != "p2" {
		t.Fatalf("release changed the state it was given: %+v", st)
	}
}

// A count stored before holders were named goes down with any closing,
// and never below zero.
func TestCountsWithoutHolders(t *testing.T) {
	st := &State{ID: "g", Variant: rules.Xiangqi, Status: StatusOngoing, Connections: [2]int{1, 0}}
	ch, ok := LetGo(st, rules.First, "p1")
	if !ok || connected(t, ch) || ch.State.Connections[rules.First] != 0 {
		t.Fatalf("let go of a stored count: %v %+v", ok, ch.State)
	}
	if _, ok := LetGo(ch.State, rules.First, "p1"); ok {
		t.Fatal("a count went below zero")
	}
	if _, ok := Hold(&State{Status: StatusEnded}, rules.First, "p1"); ok {
		t.Fatal("a finished game recorded a holder")
	}
}
