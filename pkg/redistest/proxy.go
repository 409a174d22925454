package redistest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy stands between the processes of a test and a Redis server, so
// that the test can take the server away from them: Cut closes every
// connection through it and refuses new ones, as a Redis restart would,
// and Blackhole lets commands through but loses every answer, as a
// network partition right after a write would, until Restore.
type Proxy struct {
	target string
	ln     net.Listener

	mu        sync.Mutex
	cut       bool
	blackhole bool
	conns     map[net.Conn]struct{}
	// lost holds the connections that lost an answer: their client can no
	// longer match answers to commands, and Restore closes them, as the
	// client's timeouts would.
	lost map[net.Conn]struct{}
	wg   sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to target until
// tb ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redis proxy: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}, lost: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	tb.Cleanup(p.close)
	return p
}

// Addr is the address to give the processes under test.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every open connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Blackhole forwards what clients send and drops what the server answers
// until Restore.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	p.blackhole = true
	p.mu.Unlock()
}

// Restore lets connections through again, closing those that lost an
// answer.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.blackhole = false, false
	for c := range p.lost {
		_ = c.Close()
	}
	clear(p.lost)
}

// answers copies the server's answers to client, dropping them while the
// proxy is a blackhole.
func (p *Proxy) answers(client, server net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := p.blackhole
			if drop {
				p.lost[client] = struct{}{}
			}
			p.mu.Unlock()
			if !drop {
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Go(func() { p.forward(client) })
	}
}

// forward pipes one client connection to a new server connection; a
// connection made while the proxy is cut is closed at once.
func (p *Proxy) forward(client net.Conn) {
	p.mu.Lock()
	cut := p.cut
	p.mu.Unlock()
	if cut {
		_ = client.Close()
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client, server) {
		return
	}
	defer p.untrack(client, server)
	done := make(chan struct{}, 2)
	// Either side ending (or Cut) ends the pair.
	pipe := func(oneWay func()) {
		oneWay()
		_ = client.Close()
		_ = server.Close()
		done <- struct{}{}
	}
	go pipe(func() { _, _ = io.Copy(server, client) })
	go pipe(func() { p.answers(client, server) })
	<-done
	<-done
}

// track registers a pair unless the proxy was cut meanwhile.
func (p *Proxy) track(client, server net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		_ = client.Close()
		_ = server.Close()
		return false
	}
	p.conns[client] = struct{}{}
	p.conns[server] = struct{}{}
	return true
}

func (p *Proxy) untrack(client, server net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, client)
	delete(p.conns, server)
	delete(p.lost, client)
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
