package apierr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/logging"
	"github.com/palacehq/palace/pkg/redisx"
)

// blockingTransport answers no request: each ends when its context does,
// as a call to a server that does not answer.
type blockingTransport struct{}

func (blockingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// TestACodedErrorKeepsItsCodeOverAWrappedTimeout: a handler's code
// stands even when the cause it wraps is a context error: that may be an
// outgoing call's own timeout, such as the http.Client{Timeout} of
// matchmaking's Google key fetch (its errors match
// context.DeadlineExceeded), which a client must not read as its own
// deadline having passed.
func TestACodedErrorKeepsItsCodeOverAWrappedTimeout(t *testing.T) {
	client := &http.Client{Timeout: 20 * time.Millisecond, Transport: blockingTransport{}}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://www.googleapis.com/oauth2/v3/certs", nil)
	_, httpErr := client.Do(req)
	if httpErr == nil {
		t.Fatal("no timeout")
	}
	errKeys := errors.New("cannot fetch Google's signing keys")
	cause := fmt.Errorf("%w: %w", errKeys, httpErr) // as google.Verifier.fetch wraps it
	const msg = "cannot check the token with Google right now; retry"
	err := (&Error{Code: Unavailable, Msg: msg, Err: cause}).WithInfo("SOME_REASON", nil)
	got := ToStatus(context.Background(), logging.Discard(), err)
	st := status.Convert(got)
	if st.Code() != codes.Unavailable || st.Message() != msg || ReasonOf(got) != "SOME_REASON" {
		t.Fatalf("coded Unavailable wrapping an HTTP client timeout (%v) reached the client as %v %q (reason %q); want Unavailable %q with its reason",
			httpErr, st.Code(), st.Message(), ReasonOf(got), msg)
	}
}

// TestAClientGoneIsNoOutage: an error that comes of the client's leaving
// or of its deadline passing (a call to another service that inherited
// it, cut short) was mapped as that call's failure: Unavailable, logged
// as an outage. It is the client's own Canceled or DeadlineExceeded, and
// logs nothing; a call to another service that times out by itself is
// still an outage.
func TestAClientGoneIsNoOutage(t *testing.T) {
	downstream := &Error{Code: Unavailable, Msg: "the game service is unavailable", Err: status.Error(codes.DeadlineExceeded, "context deadline exceeded")}
	left, cancel := context.WithCancel(context.Background())
	cancel()
	passed, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	passing, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	waiting, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want codes.Code
	}{
		{"the client left", left, codes.Canceled},
		{"its deadline passed", passed, codes.DeadlineExceeded},
		{"its deadline passing as the call to another service saw it pass", passing, codes.DeadlineExceeded},
		{"the client waiting", waiting, codes.Unavailable},
	} {
		var buf strings.Builder
		got := ToStatus(tc.ctx, slog.New(slog.NewTextHandler(&buf, nil)), downstream)
		if status.Code(got) != tc.want || (tc.want != codes.Unavailable) != (buf.Len() == 0) {
			t.Errorf("%s: %v, logged %q; want %v, logged only for an outage", tc.name, got, buf.String(), tc.want)
		}
	}
}

// TestAFaultIsLoggedWhenItsClientLeft: a call whose client left is
// answered Canceled, but a fault of its own must still reach the log: a
// write the replicas did not confirm (WAIT is not cut short by a client
// that cancels) or a bug. Answering the client's code, the fault went
// unlogged.
func TestAFaultIsLoggedWhenItsClientLeft(t *testing.T) {
	left, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"a write not confirmed by replicas", fmt.Errorf("commit game g1: %w", redisx.ErrNotReplicated), "write not confirmed by replicas"},
		{"a bug", fmt.Errorf("game g1: its event log lacks version 7 but holds 9"), "internal error"},
	} {
		var buf strings.Builder
		got := ToStatus(left, slog.New(slog.NewTextHandler(&buf, nil)), tc.err)
		if !strings.Contains(buf.String(), tc.want) {
			t.Errorf("%s, its client gone: answered %v and logged %q; want the fault logged (%q)", tc.name, got, buf.String(), tc.want)
		}
	}
}
