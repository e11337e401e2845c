package redistest

import (
	"net"
	"sync"
	"testing"
)

// Link is a replication link a test can stall: a loopback TCP relay
// between a replica and its primary (the replica is started with
// --replicaof pointing at the Link). Stall holds back what the primary
// sends (the replica stays connected and keeps sending its acks, but
// learns nothing new, as over a congested or partitioned network); Cut
// then drops what was held back and closes every connection, as a
// primary dying during the stall would. Pausing the replica process
// (SIGSTOP) does not lose anything on loopback: what the primary sent
// waits in the replica's socket buffer and is applied when it resumes.
type Link struct {
	Addr   string
	target string
	ln     net.Listener

	mu      sync.Mutex
	stalled bool
	conns   map[*linkConn]bool
	closed  bool
}

type linkConn struct {
	client, server net.Conn
	mu             sync.Mutex // guards held and writes to client
	held           []byte
}

// StartLink relays 127.0.0.1:random to target until tb's cleanup.
func StartLink(tb testing.TB, target string) *Link {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("link to %s: %v", target, err)
	}
	l := &Link{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[*linkConn]bool{}}
	go l.accept()
	tb.Cleanup(l.Close)
	return l
}

// Port is the port the Link listens on.
func (l *Link) Port() int { return l.ln.Addr().(*net.TCPAddr).Port }

func (l *Link) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", l.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		lc := &linkConn{client: c, server: s}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			_ = c.Close()
			_ = s.Close()
			return
		}
		l.conns[lc] = true
		l.mu.Unlock()
		go l.up(lc)
		go l.down(lc)
	}
}

// up relays replica → primary (REPLCONF ACKs): never held back.
func (l *Link) up(lc *linkConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := lc.client.Read(buf)
		if n > 0 {
			if _, werr := lc.server.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	l.drop(lc)
}

// down relays primary → replica (the replication stream), holding it back
// while the link is stalled.
func (l *Link) down(lc *linkConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := lc.server.Read(buf)
		if n > 0 {
			l.mu.Lock()
			stalled := l.stalled
			l.mu.Unlock()
			lc.mu.Lock()
			var werr error
			if stalled {
				lc.held = append(lc.held, buf[:n]...)
			} else {
				_, werr = lc.client.Write(buf[:n])
			}
			lc.mu.Unlock()
			if werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	l.drop(lc)
}

func (l *Link) drop(lc *linkConn) {
	l.mu.Lock()
	delete(l.conns, lc)
	l.mu.Unlock()
	_ = lc.client.Close()
	_ = lc.server.Close()
}

// Stall holds back the primary's stream from now on.
func (l *Link) Stall() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stalled = true
}

// Resume delivers what was held back and relays again.
func (l *Link) Resume() {
	l.mu.Lock()
	l.stalled = false
	conns := make([]*linkConn, 0, len(l.conns))
	for lc := range l.conns {
		conns = append(conns, lc)
	}
	l.mu.Unlock()
	for _, lc := range conns {
		lc.mu.Lock()
		if len(lc.held) > 0 {
			_, _ = lc.client.Write(lc.held)
			lc.held = nil
		}
		lc.mu.Unlock()
	}
}

// Cut drops what a stall held back and closes every connection; new ones
// are relayed (not stalled) as before. It returns the bytes dropped.
func (l *Link) Cut() int {
	l.mu.Lock()
	l.stalled = false
	conns := make([]*linkConn, 0, len(l.conns))
	for lc := range l.conns {
		conns = append(conns, lc)
	}
	l.mu.Unlock()
	dropped := 0
	for _, lc := range conns {
		lc.mu.Lock()
		dropped += len(lc.held)
		lc.held = nil
		_ = lc.client.Close()
		_ = lc.server.Close()
		lc.mu.Unlock()
	}
	return dropped
}

// Close stops listening and closes every connection.
func (l *Link) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	_ = l.ln.Close()
	l.Cut()
}
