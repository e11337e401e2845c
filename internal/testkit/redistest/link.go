package redistest

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
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
	mu             sync.Mutex // guards held and the writes
	held           [2][]byte  // held back while stalled: [0] to the replica, [1] to the primary
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
		go l.pipe(lc, lc.server, lc.client, 0)
		go l.pipe(lc, lc.client, lc.server, 1)
	}
}

// pipe relays one direction (dir 0: primary → replica, the replication
// stream; 1: replica → primary, its acknowledgements), holding it back
// while the link is stalled.
func (l *Link) pipe(lc *linkConn, from, to net.Conn, dir int) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			l.mu.Lock()
			stalled := l.stalled
			l.mu.Unlock()
			lc.mu.Lock()
			var werr error
			if stalled {
				lc.held[dir] = append(lc.held[dir], buf[:n]...)
			} else {
				// What a stall held back goes first, whoever gets here
				// before Resume flushes it: the stream stays in order.
				if len(lc.held[dir]) > 0 {
					_, werr = to.Write(lc.held[dir])
					lc.held[dir] = nil
				}
				if werr == nil {
					_, werr = to.Write(buf[:n])
				}
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

// Stall holds back both directions from now on.
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
		for dir, to := range []net.Conn{lc.client, lc.server} {
			if len(lc.held[dir]) > 0 {
				_, _ = to.Write(lc.held[dir])
				lc.held[dir] = nil
			}
		}
		lc.mu.Unlock()
	}
}

// Cut drops what a stall held back and closes every connection; new ones
// are relayed (not stalled) as before. It returns the bytes dropped. The
// link stays stalled until every connection is closed, so nothing held
// back slips through while it cuts.
func (l *Link) Cut() int {
	l.mu.Lock()
	conns := make([]*linkConn, 0, len(l.conns))
	for lc := range l.conns {
		conns = append(conns, lc)
	}
	l.mu.Unlock()
	dropped := 0
	for _, lc := range conns {
		lc.mu.Lock()
		dropped += len(lc.held[0]) + len(lc.held[1])
		lc.held = [2][]byte{}
		_ = lc.client.Close()
		_ = lc.server.Close()
		lc.mu.Unlock()
	}
	l.mu.Lock()
	l.stalled = false
	l.mu.Unlock()
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

// StartPrimaryWithReplica starts a primary and one replica that follows it
// through a Link (which a test can stall or cut), and waits until the
// replica is in sync.
func StartPrimaryWithReplica(t testing.TB) (*Server, *Link) {
	t.Helper()
	primary := Start(t, "--repl-diskless-sync-delay", "0") // the replica syncs at once
	link := StartLink(t, primary.Addr)
	Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(link.Port()))
	deadline := time.Now().Add(20 * time.Second)
	for !strings.HasPrefix(primary.Do(t, "WAIT", "1", "100"), ":1") {
		if time.Now().After(deadline) {
			t.Fatal("replica not in sync after 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return primary, link
}
