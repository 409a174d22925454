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

// Renewed tells whether err ended a call whose connection a Palace server
// had sent away at its MaxConnectionAge (grpc-go's GOAWAY "max_age") and
// closed once the grace was over: no fault, and a client resumes such a
// call at once, on a new connection.
func Renewed(err error) bool {
	return status.Code(err) == codes.Unavailable && strings.Contains(status.Convert(err).Message(), `debug data: "max_age"`)
}
