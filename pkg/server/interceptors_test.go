package server

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
		logCall(context.Background(), log, "/palace.game.v1.GameService/MakeMove", time.Now(), tc.err)
		if got := buf.String(); !strings.Contains(got, "level="+tc.want+" ") {
			t.Errorf("%v was logged as %q, want level %s", status.Code(tc.err), got, tc.want)
		}
	}
}
