package apierr

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/logging"
	"github.com/palacehq/palace/pkg/redisx"
)

// redisError is an error as Redis answers it.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

func TestToStatus(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantCode codes.Code
		wantMsg  string
	}{
		{name: "nil", err: nil, wantCode: codes.OK},
		{name: "invalid", err: New(Invalid, "move %s: bad", "x"), wantCode: codes.InvalidArgument, wantMsg: "move x: bad"},
		{name: "wrapped deeper", err: fmt.Errorf("layer: %w", New(NotFound, "game g1 not found")), wantCode: codes.NotFound, wantMsg: "game g1 not found"},
		{name: "conflict", err: New(Conflict, "stale version"), wantCode: codes.Aborted, wantMsg: "stale version"},
		{name: "internal hides detail", err: errors.New("redis: connection refused at 10.1.2.3"), wantCode: codes.Internal, wantMsg: "internal error"},
		{name: "a coded internal error hides its text too", err: Wrap(Internal, errors.New("script failed at 10.1.2.3")), wantCode: codes.Internal, wantMsg: "internal error"},
		{name: "cancelled context", err: fmt.Errorf("read: %w", context.Canceled), wantCode: codes.Canceled, wantMsg: "request cancelled"},
		{name: "status passes through", err: status.Error(codes.Unavailable, "down"), wantCode: codes.Unavailable, wantMsg: "down"},
		// Wrapped statuses came from a call to another service: its code is
		// not this call's, and its text may name internal addresses.
		{name: "another service's refusal is internal", err: fmt.Errorf("create game: %w", status.Error(codes.Unauthenticated, `CreateGame is an internal call: present "x-palace-service"`)), wantCode: codes.Internal, wantMsg: "internal error"},
		{name: "another service down", err: fmt.Errorf("create game: %w", status.Error(codes.Unavailable, "dial tcp 10.0.3.7:8080: connect: connection refused")), wantCode: codes.Unavailable, wantMsg: downstreamMsg},
		{name: "another service cancelled", err: fmt.Errorf("create game: %w", status.Error(codes.Canceled, "context canceled")), wantCode: codes.Canceled, wantMsg: "request cancelled"},
		{name: "a coded error keeps its code over a wrapped status", err: &Error{Code: Unavailable, Msg: "the game service is unavailable", Err: status.Error(codes.Unavailable, "dial tcp 10.0.3.7")}, wantCode: codes.Unavailable, wantMsg: "the game service is unavailable"},
		{name: "store unreachable", err: fmt.Errorf("commit game g: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), wantCode: codes.Unavailable, wantMsg: unavailableMsg},
		{name: "store connection closed", err: fmt.Errorf("load game g: %w", io.EOF), wantCode: codes.Unavailable, wantMsg: unavailableMsg},
		{name: "store pool exhausted", err: fmt.Errorf("load game g: %w", redis.ErrPoolTimeout), wantCode: codes.Unavailable, wantMsg: unavailableMsg},
		{name: "store client closed at shutdown", err: fmt.Errorf("load game g: %w", redis.ErrClosed), wantCode: codes.Unavailable, wantMsg: unavailableMsg},
		{name: "slot moved in a cluster failover", err: errors.New("MOVED 4274 10.0.3.7:7001"), wantCode: codes.Unavailable, wantMsg: unavailableMsg},
		{name: "slot migrating", err: errors.New("ASK 4274 10.0.3.7:7001"), wantCode: codes.Unavailable, wantMsg: unavailableMsg},
		{name: "not confirmed by replicas", err: fmt.Errorf("commit game g: %w", redisx.ErrNotReplicated), wantCode: codes.Unavailable, wantMsg: notReplicatedMsg},
		{name: "store script error is a bug", err: fmt.Errorf("commit game g: %w", redis.ErrNoScript), wantCode: codes.Internal, wantMsg: "internal error"},
		{name: "store busy with another's script", err: fmt.Errorf("load game g: %w", redisError("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.")), wantCode: codes.Unavailable, wantMsg: unavailableMsg},
		{name: "store full (maxmemory, noeviction)", err: fmt.Errorf("commit game g: %w", redisError("OOM command not allowed when used memory > 'maxmemory'. script: 3b33e15d, on @user_script:38.")), wantCode: codes.Unavailable, wantMsg: fullMsg},
		{name: "store short of replicas (min-replicas-to-write)", err: fmt.Errorf("commit game g: %w", redisError("NOREPLICAS Not enough good replicas to write. script: 3b33e15d, on @user_script:38.")), wantCode: codes.Unavailable, wantMsg: refusedMsg},
		{name: "store stopped writes after a failed snapshot", err: fmt.Errorf("commit game g: %w", redisError("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.")), wantCode: codes.Unavailable, wantMsg: refusedMsg},
		{name: "a group that exists is no outage", err: fmt.Errorf("create group: %w", redisError("BUSYGROUP Consumer Group name already exists")), wantCode: codes.Internal, wantMsg: "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := ToStatus(context.Background(), slog.New(slog.NewTextHandler(&buf, nil)), tt.err)
			st := status.Convert(err)
			if st.Code() != tt.wantCode || st.Message() != tt.wantMsg {
				t.Fatalf("got %v %q, want %v %q", st.Code(), st.Message(), tt.wantCode, tt.wantMsg)
			}
			// The server's line for the call stays at info when the cause
			// is logged here, and only then: one fault, one line.
			var cause interface{ CauseLogged() bool }
			if said := errors.As(err, &cause) && cause.CauseLogged(); said != (buf.Len() > 0) {
				t.Fatalf("the status says its cause was logged: %v; logged: %q", said, buf.String())
			}
		})
	}
}

// TestToStatusLogsTheCauseOfAnOutage: a coded Unavailable shows the
// client a short message, so its cause (another service down, say) must
// reach the log.
func TestToStatusLogsTheCauseOfAnOutage(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	err := &Error{Code: Unavailable, Msg: "the game service is unavailable", Err: errors.New("dial tcp 10.0.3.7:8080: connect: connection refused")}
	ToStatus(context.Background(), log, err)
	if !strings.Contains(buf.String(), "10.0.3.7:8080") {
		t.Fatalf("the outage's cause is not logged: %q", buf.String())
	}
	buf.Reset()
	ToStatus(context.Background(), log, Wrap(Invalid, errors.New("illegal move h3h9")))
	if buf.Len() != 0 {
		t.Fatalf("a client's own mistake was logged: %q", buf.String())
	}
}

// TestEveryCodeReachesTheClient: clients act on the code (an app signs in
// again on Unauthenticated, backs off on ResourceExhausted), so each
// domain code must arrive as its own gRPC code.
func TestEveryCodeReachesTheClient(t *testing.T) {
	for code, want := range map[Code]codes.Code{
		Invalid:           codes.InvalidArgument,
		NotFound:          codes.NotFound,
		AlreadyExists:     codes.AlreadyExists,
		Precondition:      codes.FailedPrecondition,
		Conflict:          codes.Aborted,
		PermissionDenied:  codes.PermissionDenied,
		Unauthenticated:   codes.Unauthenticated,
		OutOfRange:        codes.OutOfRange,
		Unavailable:       codes.Unavailable,
		ResourceExhausted: codes.ResourceExhausted,
	} {
		st := status.Convert(ToStatus(context.Background(), logging.Discard(), New(code, "why")))
		if st.Code() != want || st.Message() != "why" {
			t.Errorf("code %d reached the client as %v %q, want %v", code, st.Code(), st.Message(), want)
		}
	}
}

func TestCodeOf(t *testing.T) {
	if CodeOf(Wrap(Precondition, errors.New("x"))) != Precondition {
		t.Fatal("Wrap lost its code")
	}
	if CodeOf(errors.New("plain")) != Internal {
		t.Fatal("plain error is not Internal")
	}
}

// TestReasonOf: a caller reads the reason a coded error was sent with,
// through the wire form and wrapped on its way up, and none from errors
// without one.
func TestReasonOf(t *testing.T) {
	sent := ToStatus(context.Background(), logging.Discard(), New(Unauthenticated, "seat credential: expired").WithInfo("CREDENTIAL_EXPIRED", nil))
	if got := ReasonOf(sent); got != "CREDENTIAL_EXPIRED" {
		t.Errorf("ReasonOf(sent) = %q", got)
	}
	if got := ReasonOf(fmt.Errorf("get game: %w", sent)); got != "CREDENTIAL_EXPIRED" {
		t.Errorf("ReasonOf(wrapped) = %q", got)
	}
	for _, err := range []error{nil, errors.New("credential has expired"), status.Error(codes.Unauthenticated, "credential has expired")} {
		if got := ReasonOf(err); got != "" {
			t.Errorf("ReasonOf(%v) = %q, want none", err, got)
		}
	}
}

// TestProblemsAreOneInvalidArgumentOnOneLine: every problem named, in
// order, on one line; none is no error.
func TestProblemsAreOneInvalidArgumentOnOneLine(t *testing.T) {
	if err := Problems(nil, nil); err != nil {
		t.Fatalf("Problems of none = %v, want nil", err)
	}
	err := Problems(New(Invalid, "a: bad"), nil, errors.New("b: worse"))
	if CodeOf(err) != Invalid || err.Error() != "a: bad; b: worse" {
		t.Fatalf("Problems = %v (%v), want InvalidArgument naming a then b", err, CodeOf(err))
	}
}
