// Package apierr carries domain errors from below the handlers to the gRPC
// edge, where one table maps them to status codes. Handlers never build
// statuses from raw errors: internal detail is logged once and clients get
// a short message.
package apierr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/redisx"
)

// Code classifies an error for the client.
type Code uint8

const (
	Internal Code = iota
	Invalid
	NotFound
	AlreadyExists
	Precondition
	// Conflict is a lost compare-and-set (stale version): retry after
	// reading the current state.
	Conflict
	PermissionDenied
	Unauthenticated
	OutOfRange
	Unavailable
	ResourceExhausted
)

var grpcCodes = map[Code]codes.Code{
	Internal:          codes.Internal,
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
}

// Error is a domain error with a code and a message fit for clients.
type Error struct {
	Code Code
	Msg  string
	// Err is the cause, if any; it is not shown to clients.
	Err error
	// Reason and Meta, when Reason is set, go to the client as an
	// ErrorInfo detail: what a client acts on (a version to read from,
	// say) without parsing Msg.
	Reason string
	Meta   map[string]string
}

// ErrorDomain is the domain of the ErrorInfo details Palace sends.
const ErrorDomain = "palace"

// WithInfo gives e an ErrorInfo detail with reason and meta.
func (e *Error) WithInfo(reason string, meta map[string]string) *Error {
	e.Reason, e.Meta = reason, meta
	return e
}

// ReasonOf returns the reason of the Palace ErrorInfo detail of a status
// error that another service answered, "" if it has none: what a caller
// acts on, since messages are for people and may change.
func ReasonOf(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			return info.GetReason()
		}
	}
	return ""
}

func (e *Error) Error() string {
	if e.Err != nil && e.Msg == "" {
		return e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an error of the given code with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Wrap gives err a code; its own text becomes the client message, so only
// wrap errors whose text is meant for clients (rules errors, validation).
func Wrap(code Code, err error) *Error {
	return &Error{Code: code, Msg: err.Error(), Err: err}
}

// Problems is the InvalidArgument of every problem of errs at once, on
// one line (a status message is shown and logged as one), so that a
// caller mends them all in one go; nil when errs holds none.
func Problems(errs ...error) error {
	var msgs []string
	for _, e := range errs {
		if e != nil {
			msgs = append(msgs, e.Error())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return New(Invalid, "%s", strings.Join(msgs, "; "))
}

// CodeOf returns the code of the first *Error in err's chain; anything
// else is Internal (context errors included: ToStatus maps those).
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// ToStatus converts err for the wire. Internal errors are logged with
// their detail and reach the client as "internal error". A status whose
// cause is logged here, at warn or error, says so (CauseLogged), so that
// the server's line for the call does not say it again at that level: one
// fault, one line an operator's alerts count.
func ToStatus(ctx context.Context, log *slog.Logger, err error) error {
	logged, st := toStatus(ctx, log, err)
	if logged {
		return loggedStatus{st}
	}
	return st
}

// loggedStatus is a status error whose cause ToStatus logged.
type loggedStatus struct{ error }

func (l loggedStatus) GRPCStatus() *status.Status { return status.Convert(l.error) }

// CauseLogged tells the server's call log that the cause was logged.
func (loggedStatus) CauseLogged() bool { return true }

func (l loggedStatus) Unwrap() error { return l.error }

// deadlineSlack is how long before the client's deadline a call to
// another service that inherited it may see it pass.
const deadlineSlack = 20 * time.Millisecond

// clientGone is the status of a call whose client left or whose deadline
// passed: what it is answered, whatever failed. Nil while the client
// waits.
func clientGone(ctx context.Context, err error) error {
	switch cerr := ctx.Err(); {
	case errors.Is(cerr, context.Canceled):
		return status.Error(codes.Canceled, "request cancelled")
	case cerr != nil:
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < deadlineSlack && status.Code(err) == codes.DeadlineExceeded {
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	}
	return nil
}

// ofLeaving reports whether err comes of the client's leaving or its
// deadline: a context error, or a call to another service that inherited
// them, cut short. Such an error is no fault to log.
func ofLeaving(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	code := status.Code(err)
	return code == codes.Canceled || code == codes.DeadlineExceeded
}

func toStatus(ctx context.Context, log *slog.Logger, err error) (logged bool, st error) {
	if err == nil {
		return false, nil
	}
	// A status made here or by grpc itself passes as it is. One wrapped on
	// its way up came from a call to another service: its code and text
	// speak of that call (an Unauthenticated there is no fault of this
	// client's credential) and may name internal addresses; it is mapped.
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return false, err
	}
	gone := clientGone(ctx, err)
	if gone != nil && ofLeaving(err) {
		return false, gone
	}
	logged, st = mapError(ctx, log, err)
	if gone != nil {
		// A fault of its own (a write replicas did not confirm, a bug),
		// logged all the same, under the code of the client gone.
		return logged, gone
	}
	return logged, st
}

// mapError maps err, which is no status, logging what an operator must
// see.
func mapError(ctx context.Context, log *slog.Logger, err error) (logged bool, st error) {
	// A code chosen for the error stands even over a context error it
	// wraps: that may be a call's own timeout (a request to another
	// service, to Google), which is no deadline of this client's.
	var e *Error
	if errors.As(err, &e) && e.Code != Internal {
		logged = e.Code == Unavailable && e.Err != nil
		if logged {
			// The client reads a short message; the outage behind it is
			// logged here, once.
			log.WarnContext(ctx, "unavailable", "err", e.Err)
		}
		s := status.New(grpcCodes[e.Code], e.Msg)
		if e.Reason != "" {
			if withInfo, err := s.WithDetails(&errdetails.ErrorInfo{Reason: e.Reason, Domain: ErrorDomain, Metadata: e.Meta}); err == nil {
				s = withInfo
			}
		}
		return logged, s.Err()
	}
	switch {
	case errors.Is(err, context.Canceled):
		return false, status.Error(codes.Canceled, "request cancelled")
	case errors.Is(err, context.DeadlineExceeded):
		return false, status.Error(codes.DeadlineExceeded, "deadline exceeded")
	}
	if errors.Is(err, redisx.ErrNotReplicated) {
		log.WarnContext(ctx, "write not confirmed by replicas", "err", err)
		return true, status.Error(codes.Unavailable, notReplicatedMsg)
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
			log.WarnContext(ctx, "downstream service unavailable", "err", err)
			return true, status.Error(codes.Unavailable, downstreamMsg)
		case codes.Canceled:
			return false, status.Error(codes.Canceled, "request cancelled")
		}
		log.ErrorContext(ctx, "internal error", "err", err)
		return true, status.Error(codes.Internal, "internal error")
	}
	if Transient(err) {
		log.WarnContext(ctx, "storage unavailable", "err", err)
		return true, status.Error(codes.Unavailable, unavailableMsg)
	}
	if outOfMemory(err) {
		log.WarnContext(ctx, "storage full", "err", err)
		return true, status.Error(codes.Unavailable, fullMsg)
	}
	if redisx.WritesRefused(err) {
		log.WarnContext(ctx, "storage refuses writes", "err", err)
		return true, status.Error(codes.Unavailable, refusedMsg)
	}
	log.ErrorContext(ctx, "internal error", "err", err)
	return true, status.Error(codes.Internal, "internal error")
}

const notReplicatedMsg = "the change is stored but not yet confirmed by enough Redis replicas, so it is not acknowledged: retry with the same request_id (it is applied at most once)"

const downstreamMsg = "a service this call needs is unavailable right now: retry shortly (a command retried with the same request_id is applied at most once)"

const fullMsg = "the service's storage is full and refuses changes right now: retry shortly (a command retried with the same request_id is applied at most once)"

const refusedMsg = "the service's storage refuses changes right now: retry shortly (a command retried with the same request_id is applied at most once)"

const unavailableMsg = "the service cannot reach its storage right now: retry shortly (a command retried with the same request_id is applied at most once)"

// Transient reports an error of a store that is unreachable, restarting
// or failing over: nothing is wrong with the request, and a retry may
// succeed, so clients get Unavailable rather than Internal.
func Transient(err error) bool {
	var ne net.Error
	switch {
	case errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed):
		return true
	}
	// A MOVED or ASK that reached here is a slot changing hands, as in a
	// Redis Cluster failover, faster than the client followed it.
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	// BUSY: another client's script runs past Redis' busy threshold, and
	// nothing else runs until it ends. The space keeps BUSYGROUP and
	// BUSYKEY, answers about the request itself, out.
	busy := redis.HasErrorPrefix(err, "BUSY ")
	return moved || ask || busy || redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsMasterDownError(err) || redis.IsMaxClientsError(err)
}

// outOfMemory reports Redis refusing a write at its maxmemory under the
// noeviction policy, as deployments are told to set it. Redis refuses a
// script at its first write, so nothing of the command is stored and its
// retry is safe, like an outage's. Redis still answers, so it is not
// Transient; the game service's clocks count it as an outage all the same
// (redisx.WritesRefused): nobody can move.
func outOfMemory(err error) bool {
	return redis.HasErrorPrefix(err, "OOM ")
}
