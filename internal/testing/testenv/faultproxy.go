package testenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// proxyDialTimeout bounds the proxy's dial to its target for one connection.
const proxyDialTimeout = 5 * time.Second

// Proxy is a TCP proxy between clients and one server, for fault injection:
// clients dial Addr instead of the server, and the test switches the proxy
// between forwarding (Pass), refusing connections (Refuse) and accepting
// them without ever answering (Blackhole), to see how the clients cope with
// a server that is down or unreachable. It starts forwarding. Safe for
// concurrent use.
type Proxy struct {
	// Addr is the host:port clients dial. It stays the same for the
	// proxy's life, through Refuse and Pass.
	Addr string

	target string

	mu     sync.Mutex
	mode   proxyMode
	ln     net.Listener // nil while refusing
	conns  map[*proxyConn]struct{}
	closed bool
	wg     sync.WaitGroup // the accept loops and the connections' goroutines
}

type proxyMode int

const (
	passing proxyMode = iota
	refusing
	blackholing
)

// proxyConn is one client connection and, while it is forwarded, the
// proxy's connection to the target.
type proxyConn struct {
	client     net.Conn
	server     net.Conn // nil until dialed, or never dialed when blackholed from the start
	blackholed bool     // nothing is forwarded any more: what the client sends is discarded
}

// StartProxy starts a proxy to target (host:port) on a random port of the
// loopback interface, forwarding. It is closed when the test ends, along
// with every connection through it.
func StartProxy(t T, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: proxy to %s: %v", target, err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.accept(ln)
	t.Cleanup(p.close)
	return p
}

// Pass makes the proxy forward: it listens on Addr again after Refuse, and
// forwards new connections to the target. Connections that Blackhole
// silenced are closed, since what their clients sent meanwhile is lost;
// their clients see a reset connection and dial again. It fails when Addr
// cannot be bound again (another process took the port after Refuse) or the
// proxy is closed.
func (p *Proxy) Pass() error {
	p.mu.Lock()
	p.mode = passing
	err := p.listenLocked()
	var silenced []*proxyConn
	for c := range p.conns {
		if c.blackholed {
			silenced = append(silenced, c)
			delete(p.conns, c)
		}
	}
	p.mu.Unlock()
	for _, c := range silenced {
		c.close()
	}
	return err
}

// Refuse makes the proxy refuse connections, as a host whose server is
// down: it stops listening, so that a dial to Addr fails with "connection
// refused", and closes every connection through it.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	p.mode = refusing
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	conns := p.conns
	p.conns = map[*proxyConn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.close()
	}
}

// Blackhole makes the proxy swallow traffic, as a network that drops
// packets: it accepts connections and reads what clients send, but forwards
// nothing and never answers. Connections already open go silent too (the
// proxy closes its side towards the target), so a client notices only
// through its own timeouts. It listens on Addr again after Refuse, and fails
// as Pass does when it cannot.
func (p *Proxy) Blackhole() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = blackholing
	for c := range p.conns {
		if !c.blackholed {
			c.blackholed = true
			if c.server != nil {
				c.server.Close()
			}
		}
	}
	return p.listenLocked()
}

// listenLocked listens on Addr again if the proxy is not listening; p.mu is
// held.
func (p *Proxy) listenLocked() error {
	if p.closed {
		return errors.New("testenv: proxy " + p.Addr + " is closed")
	}
	if p.ln != nil {
		return nil
	}
	// Go sets SO_REUSEADDR, so connections in TIME_WAIT do not keep the
	// port taken.
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		return fmt.Errorf("testenv: proxy to %s: listen on %s again: %w", p.target, p.Addr, err)
	}
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

// close stops the proxy for good: it stops listening, closes every
// connection and waits for their goroutines.
func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true // first, so that no Pass or Blackhole listens again
	p.mu.Unlock()
	p.Refuse()
	p.wg.Wait()
}

// accept serves the connections to ln until it is closed.
func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		client, err := ln.Accept()
		if err != nil {
			return // closed by Refuse
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(client)
		}()
	}
}

// serve forwards one client connection, or swallows it when blackholing,
// until either side closes it or the proxy does.
func (p *Proxy) serve(client net.Conn) {
	p.mu.Lock()
	if p.mode == refusing || p.closed {
		// Accepted just before Refuse closed the listener.
		p.mu.Unlock()
		client.Close()
		return
	}
	c := &proxyConn{client: client, blackholed: p.mode == blackholing}
	p.conns[c] = struct{}{}
	p.mu.Unlock()

	if !c.blackholed {
		server, err := net.DialTimeout("tcp", p.target, proxyDialTimeout)
		if err != nil {
			// The target is down: the client sees its connection closed.
			p.drop(c)
			return
		}
		p.mu.Lock()
		_, open := p.conns[c]
		forward := open && !c.blackholed
		if forward {
			c.server = server
		}
		p.mu.Unlock()
		if !open {
			server.Close() // refused while dialing
			return
		}
		if forward {
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.toClient(c, server)
			}()
		} else {
			server.Close() // blackholed while dialing
		}
	}
	p.toServer(c)
}

// toServer copies what the client sends to the target, or discards it once
// the connection is blackholed, until the client closes its side.
func (p *Proxy) toServer(c *proxyConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			if werr := p.forward(c, buf[:n]); werr != nil {
				p.drop(c) // the target went away
				return
			}
		}
		if err == nil {
			continue
		}
		p.mu.Lock()
		server, blackholed := c.server, c.blackholed
		p.mu.Unlock()
		switch {
		case errors.Is(err, io.EOF) && !blackholed:
			// The client is done sending; the answer may still come.
			if tc, ok := server.(*net.TCPConn); ok {
				_ = tc.CloseWrite() // fails only on a connection closed already
			}
		case errors.Is(err, io.EOF):
			// A blackhole never answers, nor closes: the connection stays
			// open until Pass, Refuse or the end of the test.
		default:
			p.drop(c)
		}
		return
	}
}

// forward writes b to the target, or drops it when c is blackholed. A write
// that fails because Blackhole closed the target's side is not an error.
func (p *Proxy) forward(c *proxyConn, b []byte) error {
	p.mu.Lock()
	server, blackholed := c.server, c.blackholed
	p.mu.Unlock()
	if blackholed {
		return nil
	}
	if _, err := server.Write(b); err != nil {
		p.mu.Lock()
		blackholed = c.blackholed
		p.mu.Unlock()
		if !blackholed {
			return err
		}
	}
	return nil
}

// toClient copies the target's answers to the client until the target
// closes the connection (then the client's is closed too) or Blackhole
// does (then the client's stays open, silent).
func (p *Proxy) toClient(c *proxyConn, server net.Conn) {
	_, _ = io.Copy(c.client, server) // its error is a side closed, which ends it as intended
	p.mu.Lock()
	blackholed := c.blackholed
	p.mu.Unlock()
	if !blackholed {
		p.drop(c)
	}
}

// drop forgets c and closes both its sides.
func (p *Proxy) drop(c *proxyConn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.close()
}

// close closes both sides of c; closing twice is harmless. It reads
// c.server without p.mu: serve sets it once, under p.mu and before the
// goroutines that drop c start, and Refuse and Pass take c out of p.conns
// under p.mu first, after which serve no longer sets it.
func (c *proxyConn) close() {
	c.client.Close()
	if c.server != nil {
		c.server.Close()
	}
}
