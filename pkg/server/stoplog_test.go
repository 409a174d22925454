package server

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/logging"
)

// The per-call "rpc" line says which code a call ended with. A stream
// that a stop ends reaches its client as Unavailable ("server is shutting
// down: reconnect and resume"), as the metrics record, but the line logged
// what the handler returned under the drain (OK, or Canceled for the game
// service's StreamEvents, which reads as the client hanging up), at debug
// level: the log contradicted what the client got.
func TestAStreamAStopEndsIsLoggedWithTheCodeItsClientGot(t *testing.T) {
	var logs logging.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	addr, stop := startServerLogging(t, Config{}, log, func(s *Server) {
		s.RegisterService(&gamev1.GameService_ServiceDesc, waitingEvents{})
	})
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := gamev1.NewGameServiceClient(cc).StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				errc <- err
				return
			}
		}
	}()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := <-errc
	if status.Code(got) != codes.Unavailable {
		t.Fatalf("client got %v, want Unavailable", got)
	}
	var line string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, "msg=rpc") && strings.Contains(l, "StreamEvents") {
			line = l
		}
	}
	if !strings.Contains(line, "code=Unavailable") {
		t.Fatalf("the client got %v; its call was logged as:\n%s\nwant code=Unavailable", status.Code(got), line)
	}
}
