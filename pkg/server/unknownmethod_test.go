package server

import (
	"strings"
	"testing"
)

// A gRPC-Web call of a method or service the server does not have was
// answered HTTP 404 with no grpc-status, which Google's grpc-web library
// reads as NOT_FOUND, what Palace answers for a game that expired. It is
// Unimplemented, as over native gRPC, in binary and text mode; the
// methods the server has are served.
func TestAGRPCWebCallOfAnUnknownMethodIsUnimplemented(t *testing.T) {
	addr, _, calls := startCountingGame(t)
	msg := getGameWithID("g")
	framed := append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...)
	for _, path := range []string{"/palace.game.v1.GameService/NoSuchMethod", "/palace.game.v1.NoSuchService/GetGame", "/"} {
		for _, ct := range []string{grpcWebBinary + "+proto", grpcWebText} {
			t.Run(path+" "+ct, func(t *testing.T) {
				st, m := grpcWebCallOf(t, addr, path, ct, framed)
				if st != "12" || !strings.Contains(m, "unknown method") {
					t.Fatalf("grpc-status %q %q; want 12 (UNIMPLEMENTED) naming the unknown method", st, m)
				}
			})
		}
	}
	before := calls.Load()
	if st, m := grpcWebCall(t, addr, grpcWebBinary+"+proto", framed); calls.Load() == before {
		t.Fatalf("GetGame over gRPC-Web: grpc-status %s %q, the handler did not run", st, m)
	}
}
