package server

import (
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/grpc/codes"

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

// grpcTimeoutDigits is the most digits a Grpc-Timeout may have before its
// unit, per the gRPC protocol.
const grpcTimeoutDigits = 8

// refuseBadGRPCTimeout answers InvalidArgument, trailers-only, for a
// gRPC-Web call (binary or text) whose Grpc-Timeout is not 1 to 8 digits
// and a unit, or is given more than once, as connect-go does. The
// transcoder would answer a bare HTTP 400 in text/plain, which gRPC-Web
// clients read from its status alone, as internal: a server fault where
// the fault is the client's. Browser libraries write the timeout in
// milliseconds as app code gives it (connect-web sends `${timeoutMs}m`),
// so a fractional timeout, or a deadline more than about 27 hours away,
// is the app's mistake, and its message has to say so.
func refuseBadGRPCTimeout(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		text := framedMedia(ct, grpcWebText)
		// An empty one is none, as the transcoder takes it.
		if v := r.Header.Values("Grpc-Timeout"); (text || framedMedia(ct, grpcWebBinary)) && (len(v) > 1 || len(v) == 1 && v[0] != "") {
			var msg string
			switch {
			case len(v) != 1:
				msg = fmt.Sprintf("malformed request: Grpc-Timeout is given %d times; give one timeout", len(v))
			case !grpcTimeout(v[0]):
				msg = fmt.Sprintf("malformed request: Grpc-Timeout %q is no timeout: 1 to %d digits and a unit (H, M, S, m, u or n): in milliseconds, at most 99999999m (about 27 hours)",
					textcut.Quote(v[0], 24, "..."), grpcTimeoutDigits)
			}
			if msg != "" {
				if text {
					grpcWebTextError(w, codes.InvalidArgument, msg)
				} else {
					grpcWebError(w, ct, codes.InvalidArgument, msg)
				}
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// grpcTimeout reports whether v is 1 to 8 ASCII digits and a gRPC unit.
func grpcTimeout(v string) bool {
	if len(v) < 2 || !strings.ContainsRune("HMSmun", rune(v[len(v)-1])) {
		return false
	}
	digits := v[:len(v)-1]
	return len(digits) <= grpcTimeoutDigits && timeoutMs(digits)
}
