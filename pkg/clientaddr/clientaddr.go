// Package clientaddr tells the network address a call came from, looking
// past the proxies an operator trusts to say it (X-Forwarded-For), so
// that a service can bound what one address does.
package clientaddr

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// DefaultTrusted are the proxies trusted by default: loopback, the
// private ranges and the shared address space (RFC 6598), where the load
// balancers and ingresses in front of a deployment live. A client that
// reaches the server from such a network directly could name any
// address; an operator whose clients do sets Trusted to the proxies' own
// ranges.
const DefaultTrusted = "127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7"

// DefaultHops is how many X-Forwarded-For entries a trusted peer speaks
// for by default: the one it appended itself. Reading further left would
// believe what the client wrote whenever a hop in a trusted range (a
// node that translated the client's address) came before the proxy.
const DefaultHops = 1

// forwardedFor is the header proxies append the address they were called
// from to; grpc-go hands it over, as every header, in lower case.
const forwardedFor = "x-forwarded-for"

// Trusted are the address ranges of the proxies whose X-Forwarded-For is
// believed, and how many of its entries, from its end. The zero value
// trusts none: the peer is the client.
type Trusted struct {
	prefixes []netip.Prefix
	hops     int
}

// Parse reads a comma-separated list of CIDR ranges or single addresses
// ("none" or an empty list trusts no proxy), and how many entries of
// X-Forwarded-For, from its end, a trusted peer speaks for (0: none).
func Parse(ranges string, hops int) (Trusted, error) {
	if hops < 0 {
		return Trusted{}, fmt.Errorf("hops %d: at least 0", hops)
	}
	t := Trusted{hops: hops}
	if strings.TrimSpace(ranges) == "none" {
		return t, nil
	}
	for f := range strings.SplitSeq(ranges, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return Trusted{}, fmt.Errorf("%q is neither an address range (CIDR) nor an address", f)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if a := p.Addr(); a.Is4In6() {
			// Addresses are compared unmapped: so must the ranges be.
			if p.Bits() < 96 {
				return Trusted{}, fmt.Errorf("%q: an IPv4-mapped range must be at least /96; write it as IPv4", f)
			}
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		t.prefixes = append(t.prefixes, p.Masked())
	}
	return t, nil
}

// Of is the address of the client of the call in ctx: the peer, unless
// the peer is a trusted proxy; then the entries of X-Forwarded-For, read
// from its end, stand for the hops before it: the first that is not a
// trusted proxy is the client, reading at most Hops entries (the last
// one read is then the client, trusted range or not). An entry that is no
// address ends the search at the hop that passed it on. ok is false when
// the call has no network peer (a call made in process, a Unix socket).
func (t Trusted) Of(ctx context.Context) (a netip.Addr, ok bool) {
	p, found := peer.FromContext(ctx)
	if !found || p.Addr == nil {
		return netip.Addr{}, false
	}
	a, ok = parse(p.Addr.String())
	if !ok || !t.Proxy(a) {
		return a, ok
	}
	md, _ := metadata.FromIncomingContext(ctx)
	hops := md.Get(forwardedFor)
	read := 0
	for i := len(hops) - 1; i >= 0; i-- {
		entries := strings.Split(hops[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			if read == t.hops {
				return a, true
			}
			next, ok := parse(entries[j])
			if !ok {
				return a, true
			}
			a = next
			read++
			if !t.Proxy(a) {
				return a, true
			}
		}
	}
	return a, true
}

// Proxy reports whether a is in a trusted range: a client resolved to
// one means the proxies in front do not pass the client's address on.
func (t Trusted) Proxy(a netip.Addr) bool {
	for _, p := range t.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parse reads an address as peers and proxies write it: bare, with a
// port, in brackets, with a zone.
func parse(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// Bucket is what a bound per address counts against: an IPv4 address,
// or the /56 of an IPv6 one, since a subscriber is commonly given a /56
// (a phone a /64) and could otherwise take a fresh address for each
// call. Loopback is itself.
func Bucket(a netip.Addr) string {
	if a.Is4() || a.IsLoopback() {
		return a.String()
	}
	return netip.PrefixFrom(a, 56).Masked().String()
}
