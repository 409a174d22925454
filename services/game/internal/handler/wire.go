package handler

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/palacehq/palace/pkg/server"
	"github.com/palacehq/palace/services/game/internal/hub"
	"github.com/palacehq/palace/services/game/internal/store"
)

// Field numbers of the wire forms a stream sends (wire_test.go checks
// them against the descriptors).
const (
	eventVersionField      = 1  // Event.version
	eventKindFirstField    = 10 // the first of Event.kind's fields
	eventKindLastField     = 19 // the last of Event.kind's fields
	eventGameEndedField    = 19 // Event.game_ended
	streamEventsEventField = 2  // StreamEventsResponse.event
)

// streamEvent turns an event in its wire form into what a stream sends:
// the StreamEventsResponse around it, encoded once however many streams
// send it, and the fields a stream looks at.
func streamEvent(raw []byte) (hub.Event, error) {
	var e hub.Event
	// The commit's stamp is the public Event.commit; the stamp before it,
	// the event's last field when there (store.MarkEvent), is the log's
	// own, and what precedes it is sent.
	public := len(raw)
	first := false // the commit's first event, which names the one before
	for b := raw; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return hub.Event{}, fmt.Errorf("event: %w", protowire.ParseError(n))
		}
		if first {
			return hub.Event{}, fmt.Errorf("event field %d follows the stamp before its commit's", num)
		}
		if num == store.EventAfterField {
			public = len(raw) - len(b)
		}
		b = b[n:]
		switch {
		case num == store.EventStampField || num == store.EventAfterField:
			v, n := protowire.ConsumeBytes(b)
			if typ != protowire.BytesType || n < 0 {
				return hub.Event{}, fmt.Errorf("event's commit field %d is malformed", num)
			}
			if num == store.EventStampField {
				e.Stamp = string(v)
			} else {
				e.After, first = string(v), true
			}
		case num == eventVersionField && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return hub.Event{}, fmt.Errorf("event version: %w", protowire.ParseError(n))
			}
			e.Version = v
		case num >= eventKindFirstField && num <= eventKindLastField && typ == protowire.BytesType:
			// As a decoder reads it: the last of the kind's fields is the
			// event's kind, and one of another wire type is unknown.
			e.Ended = num == eventGameEndedField
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return hub.Event{}, fmt.Errorf("event field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	if !first {
		e.After = e.Stamp
	}
	msg := protowire.AppendTag(make([]byte, 0, public+8), streamEventsEventField, protowire.BytesType)
	e.Msg = server.NewEncoded(protowire.AppendBytes(msg, raw[:public]))
	return e, nil
}

func streamEvents(raws [][]byte) ([]hub.Event, error) {
	out := make([]hub.Event, len(raws))
	for i, raw := range raws {
		var err error
		if out[i], err = streamEvent(raw); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Notifications reads commit notifications for the hub.
func Notifications() hub.Decoder {
	return hub.Decoder{
		GameOf: store.NotificationGame,
		Events: func(payload string) ([]hub.Event, error) {
			raws, err := store.NotificationEvents(payload)
			if err != nil {
				return nil, err
			}
			return streamEvents(raws)
		},
	}
}
