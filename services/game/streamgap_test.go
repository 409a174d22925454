package game_test

import (
	"context"
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
	"github.com/palacehq/palace/services/game/internal/store"
)

// TestANotificationPastAGapIsNotSent: a notification whose version lies
// past the stream's next one (the one between was lost) is not sent as
// it came; the stream reads its log from the first missing version, and
// sends only what the log holds, in order. Here the notification names a
// version the log never gets, so the next version the stream sends must
// be the one committed after it.
func TestANotificationPastAGapIsNotSent(t *testing.T) {
	// No heartbeat check meanwhile: only the notifications drive the stream.
	env := gametest.Start(t, func(c *game.Config) { c.Heartbeat = time.Minute })
	tb := xiangqi(t, env)
	tb.move(t, "h3e3")
	v := tb.get(t).GetVersion()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := env.Client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: tb.id, AfterVersion: v})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || m.GetHeartbeat() == nil {
		t.Fatalf("first message %v (%v), want a heartbeat", m, err)
	}
	// The game's last event, as version v+2, in a notification of its own.
	key := env.Config.KeyPrefix + "{g:" + tb.id + "}"
	last, err := env.Redis.XRevRangeN(ctx, key+":e", "+", "-", 1).Result()
	if err != nil || len(last) != 1 {
		t.Fatalf("last event: %v %v", last, err)
	}
	var e gamev1.Event
	if err := proto.Unmarshal([]byte(last[0].Values["e"].(string)), &e); err != nil {
		t.Fatal(err)
	}
	e.Version = v + 2
	raw, err := proto.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	note := append([]byte(tb.id+"\x00"), binary.AppendUvarint(nil, uint64(len(raw)))...)
	note = append(note, raw...)
	channel := env.Config.KeyPrefix + "gev:" + strconv.Itoa(store.Shard(tb.id))
	if err := env.Redis.Publish(ctx, channel, note).Err(); err != nil {
		t.Fatal(err)
	}
	// Let the notification reach the stream before the next commit's.
	time.Sleep(300 * time.Millisecond)
	tb.move(t, "h10g8")
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("waiting for version %d: %v", v+1, err)
		}
		if ev := m.GetEvent(); ev != nil {
			if ev.GetVersion() != v+1 {
				t.Fatalf("event at version %d, want %d: the stream skipped a version", ev.GetVersion(), v+1)
			}
			return
		}
	}
}
