package apierr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/logging"
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
