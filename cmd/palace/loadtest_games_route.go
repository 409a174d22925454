package main

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/server"
)

// A game service deployment has several replicas, any of which serves any
// game. A client whose replica goes away (stopped, killed, cut off) sends
// the same request again to another: the request id makes a command that
// was applied before its answer got lost answer the same again, and a
// stream resumes from the last version it got. The games and clocks load
// tests do what such a client does, so that stopping or cutting off
// replicas under load shows whether a move can be lost, doubled or judged
// wrongly then; the AI load test routes its calls alike over the AI
// service's replicas.

const (
	// maxFailovers bounds how often one call moves on, so that a run whose
	// every replica is gone ends with errors instead of hanging.
	maxFailovers = 30
	// failoverPause is the first pause before a call is sent again; it
	// grows with each attempt, up to failoverPauseMax.
	failoverPause    = 50 * time.Millisecond
	failoverPauseMax = 500 * time.Millisecond
)

// quickReconnect has a connection to a replica that is back serve again
// within about a second, not after gRPC's default backoff of up to two
// minutes.
var quickReconnect = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: time.Second,
}

// route is where the calls of one game, or one of its streams, go: a
// replica and a connection to it. C is the client of the service called.
type route[C any] struct {
	replicas [][]C
	replica  int
	conn     int
	// retry sends calls again after Unavailable even to a lone replica.
	retry bool
	moved func()
	// renewed counts calls sent again because their connection was
	// renewed.
	renewed func()
}

// gameRoute routes the calls of a game to the game service's replicas.
type gameRoute = route[gamev1.GameServiceClient]

func (r *route[C]) client() C {
	cs := r.replicas[r.replica]
	return cs[r.conn%len(cs)]
}

// failover moves the route to the next replica when err says its replica
// is unavailable, or held the call past its timeout (--call-timeout), and
// reports whether the call should be sent again. A replica that holds a
// call that long is frozen or cut off, and a client with another replica
// to go to moves on; should the frozen one apply the request when it
// wakes, its request id keeps it from applying twice. With one replica
// both are errors to report, but Unavailable with retry set.
func (r *route[C]) failover(ctx context.Context, err error, attempt int) bool {
	if attempt >= maxFailovers || ctx.Err() != nil {
		return false
	}
	if server.Renewed(err) {
		// The replica renewed the connection (--max-connection-age), as
		// it may at any time: the call goes again to the same replica, on
		// a new connection.
		r.renewed()
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable:
		if len(r.replicas) < 2 && !r.retry {
			return false
		}
	case codes.DeadlineExceeded:
		// Only a call held past --call-timeout: a replica that answers
		// DeadlineExceeded itself is at fault, and the error counts.
		var held callTimedOut
		if len(r.replicas) < 2 || !errors.As(err, &held) {
			return false
		}
	default:
		return false
	}
	return r.moveOn(ctx, attempt)
}

// moveOn moves the route to the next replica (the same one when it is
// alone), after a pause that grows with attempt, and reports whether the
// call should be sent again there.
func (r *route[C]) moveOn(ctx context.Context, attempt int) bool {
	if attempt >= maxFailovers {
		return false
	}
	r.replica = (r.replica + 1) % len(r.replicas)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(min(failoverPauseMax, failoverPause*time.Duration(attempt+1))):
		// Counted only now: a call whose pause the run's end cuts short
		// is not sent again.
		r.moved()
		return true
	}
}

// onReplicas makes a call on the route's replica, and again on the next
// ones while a replica is unavailable.
func onReplicas[C, T any](ctx context.Context, r *route[C], call func(C) (T, error)) (T, error) {
	for attempt := 0; ; attempt++ {
		resp, err := call(r.client())
		if err == nil || !r.failover(ctx, err, attempt) {
			return resp, err
		}
	}
}

// replicaClients dials n connections to each address of a comma-separated
// list, with opts, and makes a client of each: replicas[i] are those of
// the i-th address. The caller closes the returned connections.
func replicaClients[C any](tr transport, addrs string, n int, newClient func(grpc.ClientConnInterface) C, opts ...grpc.DialOption) (replicas [][]C, ccs []*grpc.ClientConn, err error) {
	for _, a := range replicaAddrs(addrs) {
		var clients []C
		for range n {
			cc, err := tr.dial(a, opts...)
			if err != nil {
				closeAll(ccs)
				return nil, nil, err
			}
			ccs = append(ccs, cc)
			clients = append(clients, newClient(cc))
		}
		replicas = append(replicas, clients)
	}
	if len(replicas) == 0 {
		return nil, nil, errors.New("--addr is empty")
	}
	return replicas, ccs, nil
}

// closeAll closes every connection of ccs.
func closeAll(ccs []*grpc.ClientConn) {
	for _, cc := range ccs {
		_ = cc.Close()
	}
}

// withTimeout bounds every call.
func withTimeout(d time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		call, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		err := invoker(call, method, req, reply, cc, opts...)
		if status.Code(err) == codes.DeadlineExceeded && ctx.Err() == nil && call.Err() != nil {
			return callTimedOut{err}
		}
		return err
	}
}

// callTimedOut is the error of a call that ran out its --call-timeout: its
// replica held it that long (frozen, cut off), unlike one that answered
// DeadlineExceeded of its own, a fault of the replica to count. It keeps
// the call's status.
type callTimedOut struct{ err error }

func (e callTimedOut) Error() string              { return e.err.Error() }
func (e callTimedOut) Unwrap() error              { return e.err }
func (e callTimedOut) GRPCStatus() *status.Status { return status.Convert(e.err) }
