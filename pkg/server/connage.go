package server

import (
	"context"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// connBornKey keys the time a connection was accepted, in the contexts of
// its calls.
type connBornKey struct{}

func withConnBorn(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connBornKey{}, time.Now())
}

// connBirth dates grpc-go's own connections, as withConnBorn does those
// net/http serves.
type connBirth struct{}

func (connBirth) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return withConnBorn(ctx, nil)
}
func (connBirth) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (connBirth) HandleConn(context.Context, stats.ConnStats)                     {}
func (connBirth) HandleRPC(context.Context, stats.RPCStats)                       {}

// pastAge tells whether the connection of a call is older than age; an
// age of 0 is no limit.
func pastAge(ctx context.Context, age time.Duration) bool {
	born, ok := ctx.Value(connBornKey{}).(time.Time)
	return age > 0 && ok && time.Since(born) > age
}

// mayBeRenewed tells whether a call that its connection's end cut may
// have been cut by the connection's renewal at age: grpc-go varies each
// connection's age by up to 10% either way, so that its clients do not
// all come back at once, and with a grace shorter than that it closes
// some connections before age has passed.
func mayBeRenewed(ctx context.Context, age time.Duration) bool {
	return pastAge(ctx, age-age/10)
}

// Renewed tells whether err ended a call whose connection a Palace server
// had sent away at its MaxConnectionAge (grpc-go's GOAWAY "max_age") and
// closed once the grace was over: no fault, and a client resumes such a
// call at once, on a new connection.
func Renewed(err error) bool {
	return status.Code(err) == codes.Unavailable && strings.Contains(status.Convert(err).Message(), `debug data: "max_age"`)
}
