package server

import (
	"context"
	"net"
	"time"
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
