// Package faultproxy is a TCP proxy for fault tests: it sits between a
// client (hookonce's store) and a server (PostgreSQL, Redis), pipes bytes
// both ways, and on command resets live connections — all at once, or the
// next one to carry a request, right after the request went through and
// before its reply can come back (a lost reply to a commit, trap 12).
//
// It listens on 127.0.0.1 only and is imported by tests only.
package faultproxy

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards every connection it accepts to one target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex // guards conns and closed
	conns  map[*pair]struct{}
	closed bool
	wg     sync.WaitGroup // the accept loop and every pipe

	armed    atomic.Int64 // requests still to be cut after they pass
	refusing atomic.Bool
	accepted atomic.Int64
	cut      atomic.Int64
}

// pair is one client connection and its dial to the target.
type pair struct {
	client, server net.Conn
	once           sync.Once
	severed        atomic.Bool // an armed cut struck: the client is gone, the server drains
}

// Start listens on 127.0.0.1 at a random port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[*pair]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's TCP port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		if p.refusing.Load() {
			reset(c)
			continue
		}
		s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			reset(c) // the target is down: so is the proxy, to the client
			continue
		}
		pr := &pair{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			reset(c)
			reset(s)
			return
		}
		p.conns[pr] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(pr, c, s, true)
		go p.pipe(pr, s, c, false)
	}
}

// pipe copies from → to; upstream is the client → server direction, where
// an armed cut strikes: the chunk goes to the server, the client is reset,
// and whatever the server answers is read and thrown away for a second, so
// the server gets to apply the request (and commit) with nobody to tell.
func (p *Proxy) pipe(pr *pair, from, to net.Conn, upstream bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			switch {
			case upstream && p.takeArmed():
				pr.severed.Store(true) // before the write: no reply may slip through
				_, _ = to.Write(buf[:n])
				reset(pr.client)
				_ = pr.server.SetReadDeadline(time.Now().Add(time.Second))
				p.cut.Add(1)
				return // the other direction drains the server, then drops the pair
			case !upstream && pr.severed.Load():
				// The reply nobody will read.
			default:
				if _, werr := to.Write(buf[:n]); werr != nil && !pr.severed.Load() {
					p.drop(pr)
					return
				}
			}
		}
		if err != nil {
			p.drop(pr)
			return
		}
	}
}

func (p *Proxy) takeArmed() bool {
	for {
		n := p.armed.Load()
		if n <= 0 {
			return false
		}
		if p.armed.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// drop resets both ends of pr (once) and forgets it.
func (p *Proxy) drop(pr *pair) {
	pr.once.Do(func() {
		reset(pr.client)
		reset(pr.server)
		p.mu.Lock()
		delete(p.conns, pr)
		p.mu.Unlock()
	})
}

// reset closes c with SO_LINGER 0: the peer gets a RST, not a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// CutAll resets every live connection, both ends, and returns how many it
// cut. New connections are accepted as before.
func (p *Proxy) CutAll() int {
	p.mu.Lock()
	live := make([]*pair, 0, len(p.conns))
	for pr := range p.conns {
		live = append(live, pr)
	}
	p.mu.Unlock()
	for _, pr := range live {
		p.drop(pr)
	}
	p.cut.Add(int64(len(live)))
	return len(live)
}

// CutAfterNextRequests arms n cuts: each of the next n chunks a client
// sends is forwarded to the server, then that connection is reset before
// the server's reply can reach the client. The server may well apply the
// request (commit a transaction) whose answer the client never gets.
func (p *Proxy) CutAfterNextRequests(n int) { p.armed.Add(int64(n)) }

// Armed is how many armed cuts have not struck yet.
func (p *Proxy) Armed() int { return int(p.armed.Load()) }

// Disarm drops armed cuts that have not struck.
func (p *Proxy) Disarm() { p.armed.Store(0) }

// Refuse makes the proxy reset new connections at once (on) or forward
// them again (off): the database looks unreachable without being touched.
func (p *Proxy) Refuse(on bool) { p.refusing.Store(on) }

// Stats returns the connections accepted and cut so far (armed cuts that
// struck, and connections CutAll reset).
func (p *Proxy) Stats() (accepted, cut int) {
	return int(p.accepted.Load()), int(p.cut.Load())
}

// Close stops accepting, resets every live connection and waits for every
// goroutine the proxy started; safe to call twice.
func (p *Proxy) Close() error {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.mu.Unlock()
	var err error
	if !already {
		err = p.ln.Close()
	}
	p.CutAll()
	p.wg.Wait()
	return err
}
