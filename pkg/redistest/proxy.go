package redistest

import (
	"net"
	"sync"
	"testing"
)

// Proxy stands between the processes of a test and a Redis server, so
// that the test can take the server away from them: Cut closes every
// connection through it and refuses new ones, as a Redis restart would,
// and Blackhole lets commands through but loses every answer, as a
// network partition right after a write would, until Restore. Hold
// keeps every command from the server, as a stalled server would, until
// Release says which of them it answers. Freeze silences the connections
// open, as a partition leaves a connection half-open, while new ones
// pass.
type Proxy struct {
	target string
	ln     net.Listener

	mu        sync.Mutex
	cut       bool
	blackhole bool
	conns     map[net.Conn]struct{}
	// clients are the client sides of conns; frozen those that Freeze
	// silenced.
	clients, frozen map[net.Conn]struct{}
	// lost holds the connections that lost an answer: their client can no
	// longer match answers to commands, and Restore closes them, as the
	// client's timeouts would.
	lost map[net.Conn]struct{}
	// holding: commands are kept in held, by client connection, and not
	// sent on until Release (or Restore).
	holding bool
	held    map[net.Conn]*heldCommands
	wg      sync.WaitGroup
}

// heldCommands are what a client sent while the proxy held commands.
type heldCommands struct {
	server net.Conn
	bytes  []byte
}

// NewProxy listens on a free loopback port and forwards to target until
// tb ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redis proxy: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}, lost: map[net.Conn]struct{}{}, held: map[net.Conn]*heldCommands{},
		clients: map[net.Conn]struct{}{}, frozen: map[net.Conn]struct{}{}}
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

// Drop closes every open connection, and goes on taking new ones.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Freeze silences every connection open now, both ways and for good, and
// leaves it open, as a partition leaves a TCP connection half-open: its
// client hears nothing and gets no error. New connections pass. Restore
// closes the frozen ones, as the client's kernel would give up on them.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.clients {
		p.frozen[c] = struct{}{}
	}
}

// Blackhole forwards what clients send and drops what the server answers
// until Restore.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	p.blackhole = true
	p.mu.Unlock()
}

// Hold keeps every command sent from now on from the server, as a
// stalled server would, until Release or Restore.
func (p *Proxy) Hold() {
	p.mu.Lock()
	p.holding = true
	p.mu.Unlock()
}

// Release ends a Hold: the commands a connection holds go to the server
// if pass says so of them (all of them, in the order sent), and every
// other connection holding some is closed, as its client's timeout
// would. So a test decides which of the commands sent in a stall the
// server answers when it comes back, and which fail.
func (p *Proxy) Release(pass func(held []byte) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.release(pass)
}

// Pass sends on, during a Hold, the commands held by the connections
// whose held commands match, and goes on holding every other command,
// theirs included: a test lets one command through at a time.
func (p *Proxy) Pass(match func(held []byte) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pass(match)
}

// pass sends on the held commands that match; p.mu is held, so that a
// connection's later commands follow what it held.
func (p *Proxy) pass(match func(held []byte) bool) {
	for client, h := range p.held {
		if !match(h.bytes) {
			continue
		}
		if _, err := h.server.Write(h.bytes); err != nil {
			_ = client.Close()
			_ = h.server.Close()
		}
		delete(p.held, client)
	}
}

// Holds reports whether a connection holds commands that match.
func (p *Proxy) Holds(match func(held []byte) bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.held {
		if match(h.bytes) {
			return true
		}
	}
	return false
}

// release ends a hold, passing what pass matches and closing the other
// connections that hold commands; p.mu is held.
func (p *Proxy) release(pass func(held []byte) bool) {
	p.holding = false
	p.pass(pass)
	for client, h := range p.held {
		_ = client.Close()
		_ = h.server.Close()
	}
	clear(p.held)
}

// Restore lets connections through again, sending on the commands held
// and closing the connections that lost an answer.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.blackhole = false, false
	p.release(func([]byte) bool { return true })
	for c := range p.lost {
		_ = c.Close()
	}
	clear(p.lost)
	for c := range p.frozen {
		_ = c.Close()
	}
	clear(p.frozen)
}

// commands copies what client sends to server, keeping it back while the
// proxy holds commands.
func (p *Proxy) commands(client, server net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 && !p.send(client, server, buf[:n]) {
			return
		}
		if err != nil {
			return
		}
	}
}

// send passes b on to server, or keeps it while the proxy holds
// commands.
func (p *Proxy) send(client, server net.Conn, b []byte) bool {
	p.mu.Lock()
	if _, ok := p.frozen[client]; ok {
		p.mu.Unlock()
		return true
	}
	if p.holding {
		h := p.held[client]
		if h == nil {
			h = &heldCommands{server: server}
			p.held[client] = h
		}
		h.bytes = append(h.bytes, b...)
		p.mu.Unlock()
		return true
	}
	p.mu.Unlock()
	_, err := server.Write(b)
	return err == nil
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
			if _, ok := p.frozen[client]; ok {
				drop = true
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
	go pipe(func() { p.commands(client, server) })
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
	p.clients[client] = struct{}{}
	return true
}

func (p *Proxy) untrack(client, server net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, client)
	delete(p.conns, server)
	delete(p.lost, client)
	delete(p.held, client)
	delete(p.clients, client)
	delete(p.frozen, client)
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
