package main

import (
	"testing"

	"google.golang.org/protobuf/proto"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// TestTheLoadToolCatchesEventsAfterTheEnd: StreamEvents completes (OK)
// after the game's last event, so the tool reads on after the end until
// the stream closes. A server that sends the end twice (an event
// delivered twice), or goes on after the end with an event of a version
// the game never reaches, must be noticed.
func TestTheLoadToolCatchesEventsAfterTheEnd(t *testing.T) {
	upstream := startServe(t, "--redis-addr", redistest.Addr(t), "--key-prefix", redistest.Prefix(t), "--ai-workers", "0")
	tests := []struct {
		name  string
		extra func(end *gamev1.StreamEventsResponse) *gamev1.StreamEventsResponse
	}{
		{name: "end-doubled", extra: func(end *gamev1.StreamEventsResponse) *gamev1.StreamEventsResponse { return end }},
		{name: "event-after-the-end", extra: func(end *gamev1.StreamEventsResponse) *gamev1.StreamEventsResponse {
			e := proto.CloneOf(end.GetEvent())
			e.Version++
			e.Kind = &gamev1.Event_PlayerConnection{PlayerConnection: &gamev1.PlayerConnection{Side: commonv1.Side_SIDE_FIRST, Connected: true}}
			return &gamev1.StreamEventsResponse{Message: &gamev1.StreamEventsResponse_Event{Event: e}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := afterTheEnd(tc.extra)
			rep, errOut, code := gamesThrough(t, upstream, f)
			wantFaultCounted(t, f, rep, errOut, code)
		})
	}
}

// afterTheEnd sends, after every stream's end event, the message extra
// makes of it.
func afterTheEnd(extra func(end *gamev1.StreamEventsResponse) *gamev1.StreamEventsResponse) *fault {
	f := &fault{}
	f.events = func() eventFilter {
		return func(m *gamev1.StreamEventsResponse) ([]*gamev1.StreamEventsResponse, error) {
			if m.GetEvent().GetGameEnded() == nil {
				return []*gamev1.StreamEventsResponse{m}, nil
			}
			f.injected.Add(1)
			return []*gamev1.StreamEventsResponse{m, extra(m)}, nil
		}
	}
	return f
}
