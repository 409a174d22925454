package server

import (
	"context"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// connBornKey keys the time a connection net/http serves was accepted.
type connBornKey struct{}

func withConnBorn(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connBornKey{}, time.Now())
}

// pastAge tells whether the connection of a request net/http serves is
// older than age; an age of 0 is no limit.
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
