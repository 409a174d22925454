package clientaddr

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// call is the context of a call from peer (host:port) with the given
// X-Forwarded-For header lines.
func call(from string, forwarded ...string) context.Context {
	ctx := context.Background()
	if from != "" {
		ap := netip.MustParseAddrPort(from)
		ctx = peer.NewContext(ctx, &peer.Peer{Addr: net.TCPAddrFromAddrPort(ap)})
	}
	if len(forwarded) > 0 {
		md := metadata.MD{}
		for _, f := range forwarded {
			md.Append(forwardedFor, f)
		}
		ctx = metadata.NewIncomingContext(ctx, md)
	}
	return ctx
}

func TestOf(t *testing.T) {
	def, err := Parse(DefaultTrusted, DefaultHops)
	if err != nil {
		t.Fatal(err)
	}
	// Two proxies in front, both listed: a load balancer at 203.0.113.200
	// appends the client, the ingress at 10.0.0.2 appends the balancer.
	two, err := Parse("10.0.0.0/8,203.0.113.200", 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		trusted Trusted
		ctx     context.Context
		want    string
	}{
		{"a direct client", def, call("203.0.113.7:5000"), "203.0.113.7"},
		{"a direct client's header is its own say", def, call("203.0.113.7:5000", "198.51.100.1"), "203.0.113.7"},
		{"behind a trusted proxy", def, call("10.0.0.2:80", "198.51.100.1"), "198.51.100.1"},
		{"a made-up start is passed over", def, call("10.0.0.2:80", "1.1.1.1, 198.51.100.1"), "198.51.100.1"},
		{"one hop only: a translated address is the client", def, call("10.0.0.2:80", "6.6.6.1, 10.0.0.5"), "10.0.0.5"},
		{"header lines in order", def, call("127.0.0.1:80", "1.1.1.1, 10.1.2.3", "198.51.100.1"), "198.51.100.1"},
		{"a trusted proxy without the header", def, call("127.0.0.1:80"), "127.0.0.1"},
		{"garbage stops at the hop that passed it", def, call("10.0.0.2:80", "198.51.100.1, not-an-address"), "10.0.0.2"},
		{"an empty entry too", def, call("10.0.0.2:80", "198.51.100.1,"), "10.0.0.2"},
		{"ports and brackets", def, call("10.0.0.2:80", "[2001:db8::1]:443"), "2001:db8::1"},
		{"a port on IPv4", def, call("10.0.0.2:80", "198.51.100.1:1234"), "198.51.100.1"},
		{"a mapped address reads as IPv4", def, call("[::ffff:10.0.0.2]:80", "::ffff:198.51.100.1"), "198.51.100.1"},
		{"a mapped address with a port too", def, call("10.0.0.2:80", "[::ffff:198.51.100.1]:1234"), "198.51.100.1"},
		{"the shared address space is trusted", def, call("100.64.3.4:80", "198.51.100.1"), "198.51.100.1"},
		{"trusting none", Trusted{}, call("127.0.0.1:80", "198.51.100.1"), "127.0.0.1"},
		{"no hops", Trusted{prefixes: def.prefixes}, call("127.0.0.1:80", "198.51.100.1"), "127.0.0.1"},
		{"two listed proxies", two, call("10.0.0.2:80", "1.1.1.1, 198.51.100.1, 203.0.113.200"), "198.51.100.1"},
		{"two hops, the first not a proxy", two, call("10.0.0.2:80", "1.1.1.1, 198.51.100.1"), "198.51.100.1"},
		{"two hops at most", two, call("10.0.0.2:80", "1.1.1.1, 10.9.9.9, 203.0.113.200"), "10.9.9.9"},
		{"garbage after a trusted hop stops there", two, call("10.0.0.2:80", "198.51.100.1, junk, 203.0.113.200"), "203.0.113.200"},
	} {
		got, ok := tt.trusted.Of(tt.ctx)
		if !ok || got.String() != tt.want {
			t.Errorf("%s: %v %v, want %s", tt.name, got, ok, tt.want)
		}
	}
	if a, ok := def.Of(context.Background()); ok {
		t.Errorf("a call without a peer has address %v", a)
	}
	if !def.Proxy(netip.MustParseAddr("10.0.0.5")) || def.Proxy(netip.MustParseAddr("198.51.100.1")) {
		t.Error("Proxy tells the trusted ranges wrong")
	}
}

func TestParse(t *testing.T) {
	tr, err := Parse(" 10.0.0.0/8 , 2001:db8::5, 192.168.1.77/16, ::ffff:172.16.0.0/116", 1)
	if err != nil {
		t.Fatal(err)
	}
	for a, want := range map[string]bool{
		"10.200.0.1": true, "11.0.0.1": false, "2001:db8::5": true, "2001:db8::6": false, "192.168.200.1": true,
		"172.16.5.5": true, "172.16.16.1": false,
	} {
		if got := tr.Proxy(netip.MustParseAddr(a)); got != want {
			t.Errorf("trusts %s: %v, want %v", a, got, want)
		}
	}
	for _, s := range []string{"", "none", " none "} {
		if tr, err := Parse(s, 1); err != nil || len(tr.prefixes) != 0 {
			t.Errorf("Parse(%q): %v %v, want nothing trusted", s, tr, err)
		}
	}
	for in, want := range map[string]string{
		"10.0.0.0/8,proxy.internal": `"proxy.internal" is neither`,
		"::ffff:0.0.0.0/80":         "at least /96",
	} {
		if _, err := Parse(in, 1); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q): %v, want an error saying %q", in, err, want)
		}
	}
	if _, err := Parse(DefaultTrusted, -1); err == nil {
		t.Error("negative hops accepted")
	}
}

func TestBucket(t *testing.T) {
	for a, want := range map[string]string{
		"198.51.100.1":           "198.51.100.1",
		"2001:db8:1:2:3:4:5:6":   "2001:db8:1::/56",
		"2001:db8:1:ff:ffff::1":  "2001:db8:1::/56",
		"2001:db8:1:100::1":      "2001:db8:1:100::/56",
		"::1":                    "::1",
		"::ffff:198.51.100.1":    "198.51.100.1",
		"fe80::1%eth0":           "fe80::/56",
		"2001:db8::1:2:3:4%eth1": "2001:db8::/56",
	} {
		addr, ok := parse(a)
		if !ok {
			t.Fatalf("parse %s", a)
		}
		if got := Bucket(addr); got != want {
			t.Errorf("Bucket(%s) = %s, want %s", a, got, want)
		}
	}
}

// FuzzOf: whatever a client writes in X-Forwarded-For, Of does not panic,
// and answers either the peer or an address the header names.
func FuzzOf(f *testing.F) {
	for _, s := range []string{"198.51.100.1", "1.1.1.1, 10.0.0.1", "[::1]:80,", ",,,", "fe80::1%eth0", "::ffff:1.2.3.4:99", "[", "]:0"} {
		f.Add(s)
	}
	def, err := Parse(DefaultTrusted, 3)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, header string) {
		a, ok := def.Of(call("10.0.0.2:80", header))
		if !ok || !a.IsValid() {
			t.Fatalf("no address for %q", header)
		}
		if a.String() == "10.0.0.2" {
			return
		}
		named := false
		for e := range strings.SplitSeq(header, ",") {
			if b, ok := parse(e); ok && b == a {
				named = true
			}
		}
		if !named {
			t.Fatalf("answered %v, which %q does not name", a, header)
		}
		_ = Bucket(a)
	})
}
