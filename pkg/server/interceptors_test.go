package server

import (
	"bytes"
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
)

// An operator alerts on ERROR: it must mean a fault of the server's own,
// not a client's mistake, a client leaving, or a dependency away (which
// whoever sees it reports once).
func TestCallsAreLoggedAtTheLevelOfTheirCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "DEBUG"},
		{status.Error(codes.Canceled, "gone"), "DEBUG"},
		{status.Error(codes.InvalidArgument, "bad move"), "INFO"},
		{status.Error(codes.NotFound, "no game"), "INFO"},
		{status.Error(codes.Unavailable, "redis is away"), "WARN"},
		{status.Error(codes.Internal, "internal error"), "ERROR"},
		{status.Error(codes.Unknown, "?"), "ERROR"},
		{status.Error(codes.DataLoss, "lost"), "ERROR"},
	} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		logCall(context.Background(), log, 0, "/palace.game.v1.GameService/MakeMove", time.Now(), tc.err)
		if got := buf.String(); !strings.Contains(got, "level="+tc.want+" ") {
			t.Errorf("%v was logged as %q, want level %s", status.Code(tc.err), got, tc.want)
		}
	}
}

// A call cut by its connection's renewal is routine and logs at debug;
// grpc-go varies each connection's age by up to 10% either way, so with
// a grace shorter than that variation it closes some connections before
// MaxConnectionAge has passed. A call on a connection younger than any
// renewal, a call whose client is still there, or any call without an
// age, ending Unavailable, is no renewal and warns.
func TestOnlyACallARenewalCutLogsAtDebug(t *testing.T) {
	const age, grace = DefaultMaxConnectionAge, DefaultMaxConnectionAgeGrace
	for _, tc := range []struct {
		name   string
		maxAge time.Duration
		born   time.Duration // how long before the call's end its connection came
		cut    bool          // the call's context ended with its connection
		want   string
	}{
		{"renewed at its age", age, age + grace + time.Second, true, "DEBUG"},
		{"renewed at its age less the jitter", age, age*9/10 + grace + time.Second, true, "DEBUG"},
		{"younger than any renewal", age, age*9/10 - time.Second, true, "WARN"},
		{"client still there", age, age + grace + time.Second, false, "WARN"},
		{"no age", 0, age + grace + time.Second, true, "WARN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.WithValue(context.Background(), connBornKey{}, time.Now().Add(-tc.born)))
			defer cancel()
			if tc.cut {
				cancel()
			}
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			logCall(ctx, log, tc.maxAge, "/palace.game.v1.GameService/StreamEvents", time.Now(), status.Error(codes.Unavailable, "the stream cannot go on"))
			if got := buf.String(); !strings.Contains(got, "level="+tc.want+" ") {
				t.Errorf("logged as %q, want level %s", got, tc.want)
			}
		})
	}
}

// panickingGame's handlers panic, with what a panic may hold: internal
// detail that no client should read.
type panickingGame struct {
	gamev1.UnimplementedGameServiceServer
}

const panicDetail = "assignment to entry in nil map at 10.1.2.3"

func (panickingGame) GetGame(context.Context, *gamev1.GetGameRequest) (*gamev1.GetGameResponse, error) {
	panic(panicDetail)
}

func (panickingGame) StreamEvents(*gamev1.StreamEventsRequest, gamev1.GameService_StreamEventsServer) error {
	panic(panicDetail)
}

// A handler that panics fails its own call only, as Internal and without
// the panic's text, over every protocol; the process goes on serving.
func TestPanicsFailOnlyTheirCall(t *testing.T) {
	addr, _ := startServerWith(t, Config{}, func(s *Server) {
		s.RegisterService(&gamev1.GameService_ServiceDesc, panickingGame{})
	})
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := gamev1.NewGameServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wantInternal := func(what string, err error) {
		t.Helper()
		if st := status.Convert(err); st.Code() != codes.Internal || st.Message() != "internal error" {
			t.Fatalf("%s: %v %q, want Internal %q", what, st.Code(), st.Message(), "internal error")
		}
	}
	for range 2 { // the second round is served by the same process
		_, err := client.GetGame(ctx, &gamev1.GetGameRequest{GameId: "g"})
		wantInternal("GetGame", err)
		stream, err := client.StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: "g"})
		if err == nil {
			_, err = stream.Recv()
		}
		wantInternal("StreamEvents", err)
		if code, msg := connectCall(t, addr, "application/json", []byte(`{"gameId":"g"}`)); code != "internal" || strings.Contains(msg, "10.1.2.3") {
			t.Fatalf("GetGame over Connect: %s %q, want internal without the panic's text", code, msg)
		}
	}
}
