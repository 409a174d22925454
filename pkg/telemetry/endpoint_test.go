package telemetry

import (
	"context"
	"strings"
	"testing"
)

// TestARefusedEndpointHidesItsSecret: a collector's token given in the
// endpoint (its user info, or a query) was repeated by the refusal, which
// the process prints and logs at start.
func TestARefusedEndpointHidesItsSecret(t *testing.T) {
	const secret = "s3cr3t-ingest-token"
	for _, e := range []string{
		"https://tenant:" + secret + "@collector.example.com:4317",
		"https://tenant:" + secret + "%zz@collector.example.com:4317", // not a URL
		"http://" + secret + "@collector:4317/v1/traces",
		"tenant:" + secret + "@collector:4317",
		"https://collector:4317?token=" + secret,
		"https://collector:4317#" + secret,
		"collector:4317?token=" + secret,
		"collector:4317#" + secret,
		"collector:4317/" + secret,
	} {
		err := CheckEndpoint(e)
		if err == nil {
			t.Errorf("CheckEndpoint(%q) accepted", e)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("CheckEndpoint's refusal repeats the secret: %v", err)
		}
		// A '%' outside an IPv6 address's brackets may be a password's,
		// and hides all but the scheme.
		if !strings.Contains(e, "%") && !strings.Contains(err.Error(), "collector") {
			t.Errorf("CheckEndpoint's refusal %v does not name the collector's host", err)
		}
		if _, err := New(context.Background(), Config{ServiceName: "test", OTLPEndpoint: e}); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("New's refusal of %q: %v", e, err)
		}
	}
}

// TestAnEndpointsSecretIsHiddenWhateverItHolds: a password holding '#' or
// '?' (generated ones do) was cut there as a query would be, its user
// info then no longer found, and its first part shown; a query holding
// an '@' is no user info either.
func TestAnEndpointsSecretIsHiddenWhateverItHolds(t *testing.T) {
	const part = "Xk9vQ2mLp7"
	for _, e := range []string{
		"https://tenant:" + part + "#rest@collector:4317",
		"https://tenant:" + part + "?rest@collector:4317",
		"https://tenant:1234?" + part + "@collector:4317",
		"tenant:" + part + "#rest@collector:4317",
		"https://collector:4317/?a=b@" + part,
		"https://collector:4317/#" + part + "@x",
	} {
		err := CheckEndpoint(e)
		if err == nil || strings.Contains(err.Error(), part) {
			t.Errorf("CheckEndpoint(%q) = %v, want a refusal that hides %s", e, err, part)
		}
		if shown := RedactEndpoint(e); strings.Contains(shown, part) {
			t.Errorf("RedactEndpoint(%q) = %q", e, shown)
		}
	}
	if got := RedactEndpoint("https://collector:4317"); got != "https://collector:4317" {
		t.Errorf("RedactEndpoint of an endpoint without a secret = %q, want it as given", got)
	}
}

// TestEndpointsThatAreAccepted: every form of a collector's address the
// exporter dials is still taken.
func TestEndpointsThatAreAccepted(t *testing.T) {
	for _, e := range []string{"collector:4317", "localhost:4317", "[::1]:4317", "http://[::1]:4317", "https://collector:4317/", "HTTP://collector:4317", "http://[fe80::1%25eth0]:4317"} {
		if err := CheckEndpoint(e); err != nil {
			t.Errorf("CheckEndpoint(%q) = %v, want it taken", e, err)
		}
	}
	for _, e := range []string{"collector:0", "collector:http", "collector:70000", "http://collector:0"} {
		if err := CheckEndpoint(e); err == nil {
			t.Errorf("CheckEndpoint(%q) took a port no dialer reads", e)
		}
	}
}

// TestADoubleSlashPastTheHostIsNoScheme: the first "://" anywhere was
// taken for the end of a scheme, so that a query holding a URL, or a
// password holding "://", showed all before it, token and all.
func TestADoubleSlashPastTheHostIsNoScheme(t *testing.T) {
	const secret = "s3cr3t-ingest-token"
	for _, e := range []string{
		"collector:4317?token=" + secret + "&next=https://grafana.example",
		"collector:4317/" + secret + "?next=http://x",
		"collector:4317#" + secret + "&back=https://x",
		"tenant:" + secret + "://rest@collector:4317", // a generated password holding "://"
	} {
		if shown := RedactEndpoint(e); strings.Contains(shown, secret) {
			t.Errorf("RedactEndpoint(%q) = %q", e, shown)
		}
		if err := CheckEndpoint(e); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("CheckEndpoint(%q) = %v", e, err)
		}
		if _, err := New(context.Background(), Config{ServiceName: "test", OTLPEndpoint: e}); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("New's refusal of %q: %v", e, err)
		}
	}
}

// TestOnlyTheHostAndPortAreShown: what followed the port other than '/',
// '?' or '#' (a backslash, which browsers read as '/'; a ';' parameter;
// a space from a pasted line) was shown whole.
func TestOnlyTheHostAndPortAreShown(t *testing.T) {
	const secret = "s3cr3t-ingest-token"
	for _, e := range []string{
		`https://collector:4317\v1\traces\` + secret,
		`collector:4317\` + secret,
		"https://collector:4317;token=" + secret,
		"collector:4317;token=" + secret,
		"https://collector:4317 token=" + secret,
		"tenant%3A" + secret + "%40collector:4317",
	} {
		if shown := RedactEndpoint(e); strings.Contains(shown, secret) {
			t.Errorf("RedactEndpoint(%q) = %q", e, shown)
		}
		if err := CheckEndpoint(e); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("CheckEndpoint(%q) = %v", e, err)
		}
	}
}

const secretMark = "MRKzq9"

// endpointWithMark makes an endpoint with the marker placed in one part: 0 the
// password, 1 the user (no password), 2 the path, 3 the query, 4 the
// fragment, 5 right after the port behind sep, 6 the password of user
// info whose '@' is percent-encoded.
func endpointWithMark(scheme uint8, where uint8, user, pass, host, port, sep, rest string) string {
	var b strings.Builder
	switch scheme % 3 {
	case 1:
		b.WriteString("http://")
	case 2:
		b.WriteString("https://")
	}
	switch where % 7 {
	case 0:
		b.WriteString(user + ":" + pass + secretMark + rest + "@")
	case 1:
		b.WriteString(user + secretMark + rest + "@")
	case 6:
		b.WriteString(user + ":" + pass + secretMark + rest + "%40")
	}
	b.WriteString(host + ":" + port)
	switch where % 7 {
	case 2:
		b.WriteString("/" + sep + secretMark + rest)
	case 3:
		b.WriteString("?" + sep + secretMark + rest)
	case 4:
		b.WriteString("#" + sep + secretMark + rest)
	case 5:
		b.WriteString(sep + secretMark + rest)
	}
	return b.String()
}

func checkMarkHidden(t *testing.T, e string) {
	t.Helper()
	if strings.Count(e, secretMark) != 1 {
		return
	}
	if shown := RedactEndpoint(e); strings.Contains(shown, secretMark) {
		t.Errorf("RedactEndpoint(%q) = %q shows the secret", e, shown)
	}
	if err := CheckEndpoint(e); err != nil && strings.Contains(err.Error(), secretMark) {
		t.Errorf("CheckEndpoint(%q) = %v shows the secret", e, err)
	}
}

// FuzzRedactEndpoint: a secret in user info, a path, a query, a fragment
// or glued after the port is never shown by RedactEndpoint or a refusal.
func FuzzRedactEndpoint(f *testing.F) {
	f.Add(uint8(2), uint8(0), "tenant", "pw", "collector", "4317", "", "")
	f.Add(uint8(0), uint8(5), "", "", "collector", "4317", ":", "")
	f.Add(uint8(1), uint8(3), "", "", "[::1]", "4317", "token=", "")
	f.Add(uint8(0), uint8(1), "a", "", "collector", "4317", "", "://x")
	f.Add(uint8(2), uint8(0), "tenant", "a#b?c/d", "collector", "4317", "", "%40")
	f.Fuzz(func(t *testing.T, scheme, where uint8, user, pass, host, port, sep, rest string) {
		if strings.ContainsAny(host+port, "@/?#%") || strings.Contains(host, "[") && strings.Contains(port+sep+rest, "]") {
			return // the mark would be no longer where it was put (in a host, an IPv6 literal's zone)
		}
		if where%7 == 5 && (sep == "" || strings.Contains(sep, "@")) {
			// Right after the port the mark would be read as the port,
			// and after an '@' as the host, which an endpoint names.
			sep = "?" + sep
		}
		checkMarkHidden(t, endpointWithMark(scheme, where, user, pass, host, port, sep, rest))
	})
}

// TestUserInfoBeforeAnEncodedAtIsHidden: user info whose '@' (the one
// before the host) is percent-encoded, as a templating tool that escapes
// '@' writes it, was shown whole: only a literal '@' made user info, and
// "tenant:<secret>" was read as a host and port.
func TestUserInfoBeforeAnEncodedAtIsHidden(t *testing.T) {
	const secret = "s3cr3t-ingest-token"
	for _, e := range []string{
		"tenant:" + secret + "%40collector:4317",
		"https://tenant:" + secret + "%40collector:4317",
	} {
		if shown := RedactEndpoint(e); strings.Contains(shown, secret) {
			t.Errorf("RedactEndpoint(%q) = %q", e, shown)
		}
		if err := CheckEndpoint(e); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("CheckEndpoint(%q) = %v", e, err)
		}
	}
}

// TestWhatIsGluedToThePortIsHidden: what followed the port made of host
// characters (':', '.', '-', '_', letters, digits) was shown whole, and
// the refusal printed it.
func TestWhatIsGluedToThePortIsHidden(t *testing.T) {
	const secret = "s3cr3t-ingest-token"
	for _, e := range []string{
		"collector:4317:" + secret,
		"https://collector:4317:" + secret,
		"https://collector:4317." + secret,
		"http://[::1]:4317:" + secret,
	} {
		if shown := RedactEndpoint(e); strings.Contains(shown, secret) {
			t.Errorf("RedactEndpoint(%q) = %q", e, shown)
		}
		if err := CheckEndpoint(e); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("CheckEndpoint(%q) = %v", e, err)
		}
	}
}

// TestEncodedUserInfoHoldingASlashIsHidden: user info whose '@' is
// percent-encoded (TestUserInfoBeforeAnEncodedAtIsHidden's case) and whose
// secret holds a '/', '?' or '#' (a base64 API key, a password): the part
// of the secret before it is shown as a host and port.
func TestEncodedUserInfoHoldingASlashIsHidden(t *testing.T) {
	for _, c := range []struct{ e, part string }{
		{"https://AKIAsecretkey/Zm9vYmFy%40collector:4317", "AKIAsecretkey"},
		{"https://tenant:90210/pw%40collector:4317", "90210"},
		{"tenant:90210?pw%40collector:4317", "90210"},
		{"https://tenant:90210#pw%40collector:4317", "90210"},
	} {
		shown := RedactEndpoint(c.e)
		if strings.Contains(shown, c.part) {
			t.Errorf("RedactEndpoint(%q) = %q shows %q of the user info", c.e, shown, c.part)
		}
		if err := CheckEndpoint(c.e); err == nil || strings.Contains(err.Error(), c.part) {
			t.Errorf("CheckEndpoint(%q) = %v", c.e, err)
		}
	}
}

// TestEncodedUserInfoInBracketsIsHidden: user info whose '@' is
// percent-encoded, inside brackets, was taken for an IPv6 literal (any
// bracketed run of host characters was), shown, and in the host:port form
// accepted. Brackets hold an IPv6 address or are no host.
func TestEncodedUserInfoInBracketsIsHidden(t *testing.T) {
	const secret = "s3cr3t-ingest-token"
	for _, e := range []string{
		"[tenant:" + secret + "%40collector]:4317",
		"https://[tenant:" + secret + "%40collector]:4317",
		endpointWithMark(2, 6, "[tenant", "", "collector]", "4317", "", ""),
	} {
		if shown := RedactEndpoint(e); strings.Contains(shown, secret) || strings.Contains(shown, secretMark) {
			t.Errorf("RedactEndpoint(%q) = %q shows the password", e, shown)
		}
		if err := CheckEndpoint(e); err == nil || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secretMark) {
			t.Errorf("CheckEndpoint(%q) = %v", e, err)
		}
	}
}

// TestAZoneIsAName: netip reads anything after a zone's '%' as the zone
// (':' and a further '%' included), so user info whose '@' is
// percent-encoded, in brackets behind "::1%25", was taken for an IPv6
// literal: shown whole, accepted in the host:port form.
func TestAZoneIsAName(t *testing.T) {
	const secret = "s3cr3t-ingest-token"
	for _, e := range []string{
		"[::1%25tenant:" + secret + "%40collector]:4317",
		"https://[::1%25tenant:" + secret + "%40collector]:4317",
		"[fe80::1%25tenant:" + secret + "%40collector]:4317",
	} {
		if shown := RedactEndpoint(e); strings.Contains(shown, secret) {
			t.Errorf("RedactEndpoint(%q) = %q shows the password", e, shown)
		}
		if err := CheckEndpoint(e); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("CheckEndpoint(%q) = %v", e, err)
		}
	}
	checkMarkHidden(t, endpointWithMark(0, 6, "[::1%25x", "s3cr3t", "collector]", "4317", "", ""))
	checkMarkHidden(t, endpointWithMark(2, 6, "[::1%25x", "s3cr3t", "collector]", "4317", "", ""))
}

// TestBracketsHoldOnlyIPv6: an IPv4 address or a name in brackets was
// taken in the host:port form (SplitHostPort strips the brackets) and
// shown as nothing: it is refused, as in the URL form.
func TestBracketsHoldOnlyIPv6(t *testing.T) {
	for _, e := range []string{"[10.0.0.1]:4317", "[collector]:4317"} {
		if err := CheckEndpoint(e); err == nil {
			t.Errorf("CheckEndpoint(%q) accepts it", e)
		}
	}
}

// TestZonedEndpointsAreTakenAndShownWhole: IPv6 addresses with an
// interface zone were accepted by CheckEndpoint and refused by New, gRPC
// reading the zone's '%' as a URL escape: in both forms they are taken,
// shown whole, and New starts with them.
func TestZonedEndpointsAreTakenAndShownWhole(t *testing.T) {
	for _, e := range []string{
		"[fe80::1%eth0]:4317", "[fe80::1%en0]:4317", "[fe80::1%eth0.100]:4317", "[fe80::1%wlan-1]:4317", "[fe80::1%2]:4317",
		"http://[fe80::1%25eth0]:4317", "https://[fe80::1%25en0]:4317", "http://[fe80::1%25eth0.100]:4317", "http://[fe80::1%25wlan-1]:4317",
		"[::ffff:10.0.0.1]:4317", "[::1]:4317",
	} {
		if err := CheckEndpoint(e); err != nil {
			t.Errorf("CheckEndpoint(%q) = %v", e, err)
		}
		if got := RedactEndpoint(e); got != e {
			t.Errorf("RedactEndpoint(%q) = %q, want it whole", e, got)
		}
		tel, err := New(context.Background(), Config{ServiceName: "test", OTLPEndpoint: e, OTLPInsecure: true})
		if err != nil {
			t.Errorf("New(%q) = %v", e, err)
			continue
		}
		_ = tel.Shutdown(context.Background())
	}
}

// TestNoSecretThroughBracketsOrZones: secrets placed in and around
// brackets and zones are hidden.
func TestNoSecretThroughBracketsOrZones(t *testing.T) {
	const s = "Zq7sekret"
	for _, e := range []string{
		"[" + s + "]:4317", "http://[" + s + "]:4317", "[fe80::1%" + s + "@c]:4317",
		"http://[fe80::1%25x%40" + s + "]:4317", "[fe80::1%x%40" + s + "]:4317",
		"http://u:" + s + "@[fe80::1%25eth0]:4317", "u:" + s + "@[fe80::1%eth0]:4317",
		"http://[fe80::1%25eth0]:4317/" + s, "[fe80::1%eth0]:4317#" + s, "[fe80::1%eth0]:4317?" + s,
		"http://[fe80::1%25eth0]" + s + ":4317", "[fe80::1%eth0]:" + s,
		"http://[fe80::1%25eth0]:4317:" + s, "[::1]:4317]" + s, "[[::1]:" + s + "]:4317",
		"http://u:[" + s + "]@c:4317", "[u:" + s + "]@c:4317", "http://[::1%25" + s + "%2F]:4317",
		"http://[fe80::1%25eth0%5D" + s + "]:4317", "[fe80::1%25%25" + s + "]:4317",
		"http://[v1.x:" + s + "]:4317", "http://[::1%25e]%40" + s + ":4317",
		"http://[fe80::1%25eth0~" + s + "]:4317",
	} {
		// A zone is part of the host, shown by design: only a secret
		// outside a valid zone counts.
		if shown := RedactEndpoint(e); strings.Contains(shown, s) && !ipv6ZoneHolds(shown, s) {
			t.Errorf("RedactEndpoint(%q) = %q", e, shown)
		}
		if err := CheckEndpoint(e); err != nil && strings.Contains(err.Error(), s) && !ipv6ZoneHolds(err.Error(), s) {
			t.Errorf("CheckEndpoint(%q) = %v", e, err)
		}
	}
}

func ipv6ZoneHolds(shown, s string) bool {
	i := strings.Index(shown, s)
	open := strings.LastIndex(shown[:i], "[")
	end := strings.Index(shown[i:], "]")
	return open >= 0 && end >= 0 && ipv6Literal(shown[open+1:i+end])
}
