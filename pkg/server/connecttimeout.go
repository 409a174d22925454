package server

import (
	"fmt"
	"net/http"

	"connectrpc.com/connect"

	"github.com/palacehq/palace/pkg/textcut"
)

// connectTimeoutDigits is the most digits a Connect-Timeout-Ms may have,
// per the Connect protocol.
const connectTimeoutDigits = 10

// refuseBadConnectTimeout answers InvalidArgument, as a Connect error, for
// a call whose Connect-Timeout-Ms is not a count of milliseconds of 1 to
// 10 digits, or is given more than once. The transcoder would answer a bare HTTP 400 in text/plain,
// which Connect clients read from its status alone, as internal: a server
// fault where the fault is the client's (a fractional or negative timeout
// from app code).
func refuseBadConnectTimeout(next http.Handler) http.Handler {
	errs := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An empty one is none, as connect-go takes it.
		if v := r.Header.Values("Connect-Timeout-Ms"); len(v) > 1 || len(v) == 1 && v[0] != "" {
			var err error
			switch {
			case len(v) != 1:
				err = fmt.Errorf("malformed request: Connect-Timeout-Ms is given %d times; give one timeout", len(v))
			case !timeoutMs(v[0]):
				err = fmt.Errorf("malformed request: Connect-Timeout-Ms %q is no timeout in milliseconds (1 to %d digits)", textcut.Quote(v[0], 24, "..."), connectTimeoutDigits)
			}
			if err != nil {
				_ = errs.Write(w, r, connect.NewError(connect.CodeInvalidArgument, err))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// timeoutMs reports whether v is 1 to 10 ASCII digits.
func timeoutMs(v string) bool {
	if len(v) == 0 || len(v) > connectTimeoutDigits {
		return false
	}
	for i := range len(v) {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}
