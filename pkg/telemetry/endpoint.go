package telemetry

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// CheckEndpoint reports whether e is an endpoint New takes: host:port, or
// an http or https URL of a host and port and nothing more. The exporter
// itself would take a URL for a host name and export nothing. A refusal
// names e as RedactEndpoint shows it, since it is printed and logged.
func CheckEndpoint(e string) error {
	shown := RedactEndpoint(e)
	scheme, _, isURL := splitScheme(e)
	if !isURL {
		host, port, err := net.SplitHostPort(e)
		// Brackets hold an IPv6 address, and nothing else.
		if err != nil || !hostChars(host) || !validHost(host) || strings.HasPrefix(e, "[") && !ipv6Literal(host) || !validPort(port) {
			return fmt.Errorf("%q: want host:port, http://host:port or https://host:port", shown)
		}
		return nil
	}
	if s := strings.ToLower(scheme); s != "http" && s != "https" {
		return fmt.Errorf("%q: the scheme is not http (plaintext) or https (TLS)", shown)
	}
	u, err := url.Parse(e)
	switch {
	case err != nil:
		return fmt.Errorf("%q: not a URL", shown)
	case !hostChars(u.Hostname()) || !validHost(u.Hostname()) || !validPort(u.Port()):
		return fmt.Errorf("%q: want a host and a port, such as http://collector:4317", shown)
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("%q: an OTLP/gRPC endpoint has no path, query or credentials (send a collector's credentials in OTEL_EXPORTER_OTLP_HEADERS)", shown)
	}
	return nil
}

// splitScheme splits a URL's scheme (RFC 3986: a letter, then letters,
// digits, '+', '-' or '.') from the rest; a "://" found past such a
// prefix (in a query, or a password) makes no URL of e.
func splitScheme(e string) (scheme, rest string, ok bool) {
	scheme, rest, found := strings.Cut(e, "://")
	if !found || scheme == "" {
		return "", e, false
	}
	for i, c := range scheme {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", e, false
		}
	}
	return scheme, rest, true
}

// hostChars reports whether h is made of what a host name or an IP
// address (an IPv6 zone included) is written with.
func hostChars(h string) bool {
	if h == "" {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-_:%", c)) {
			return false
		}
	}
	return true
}

// validHost reports whether h, made of hostChars, is a name or an IPv6
// address: a ':' or a '%' (a zone's) belongs to IPv6 addresses only.
func validHost(h string) bool {
	return !strings.ContainsAny(h, ":%") || ipv6Literal(h)
}

// ipv6Literal reports whether s is an IPv6 address, its zone as a URL
// writes it (%25) or not. A zone is a name (RFC 6874: unreserved
// characters), which netip does not check.
func ipv6Literal(s string) bool {
	s = strings.Replace(s, "%25", "%", 1)
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() {
		return false
	}
	_, zone, _ := strings.Cut(s, "%")
	return !strings.ContainsFunc(zone, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-._~", c))
	})
}

// validPort reports whether p is a port number, as a dialer reads it.
func validPort(p string) bool {
	n, err := strconv.ParseUint(p, 10, 16)
	return err == nil && n > 0
}

// RedactEndpoint is e as it may be shown: its scheme and its host and
// port, anything else (user info, whose password may hold any character;
// a path, a query, a fragment, which may hold a token) replaced by xxxxx.
// Anything that makes where the host starts or ends uncertain (an '@'
// after a '/', '?' or '#'; a character glued to the port; a '%' past the
// host; a scheme other than http or https beside an '@') hides all but a
// known scheme.
func RedactEndpoint(e string) string {
	scheme, rest, isURL := splitScheme(e)
	prefix := ""
	if isURL {
		if s := strings.ToLower(scheme); s != "http" && s != "https" && strings.Contains(e, "@") {
			return "xxxxx"
		}
		prefix = scheme + "://"
	}
	shown := prefix
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if strings.ContainsAny(rest[:at], "/?#\\") {
			return prefix + "xxxxx"
		}
		shown, rest = shown+"xxxxx@", rest[at+1:]
	}
	n := hostPortLen(rest)
	if n == 0 || strings.Contains(rest[n:], "%") {
		// A '%' past the host may encode the '@' that ends user info:
		// what was read as the host may be a user and a password.
		return prefix + "xxxxx"
	}
	shown += rest[:n]
	switch after := rest[n:]; {
	case after == "" || after == "/":
	case strings.ContainsRune("/?#", rune(after[0])):
		shown += "/xxxxx"
	default:
		return prefix + "xxxxx"
	}
	return shown
}

// hostPortLen is the length of the host, and the ':' and digits of a port
// if any, that s begins with: a name of letters, digits, '.', '-' and
// '_', or an IPv6 address (a zone included) in brackets; 0 for none.
func hostPortLen(s string) int {
	n := 0
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 || !ipv6Literal(s[1:end]) {
			return 0
		}
		n = end + 1
	} else {
		for n < len(s) && (hostChars(s[n:n+1]) && s[n] != ':' && s[n] != '%') {
			n++
		}
		if n == 0 {
			return 0
		}
	}
	if n < len(s) && s[n] == ':' {
		d := n + 1
		for d < len(s) && s[d] >= '0' && s[d] <= '9' {
			d++
		}
		if d > n+1 {
			n = d
		}
	}
	return n
}

// grpcTarget is the target gRPC dials for an endpoint CheckEndpoint
// took: its host and port, named as such. gRPC reads its target as a URL,
// so a bare host:port whose host reads as one of its schemes (unix,
// unix-abstract, dns, passthrough) would be dialed as that, and an IPv6
// zone's '%' is written %25 (a URL's host, as url.Parse gives it, has it
// unescaped).
func grpcTarget(e string) string {
	hostPort := e
	if _, rest, isURL := splitScheme(e); isURL {
		hostPort, _, _ = strings.Cut(rest, "/")
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return hostPort
	}
	host = strings.Replace(strings.Replace(host, "%25", "%", 1), "%", "%25", 1)
	return "dns:///" + net.JoinHostPort(host, port)
}
