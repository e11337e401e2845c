package faultproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hookonce/hookonce/internal/testkit/faultproxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lineServer answers each line with "ok <line>" and counts the lines it
// applied, like a database counting commits.
func lineServer(t *testing.T) (addr string, applied *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	applied = new(atomic.Int64)
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			go func() {
				rd := bufio.NewReader(c)
				for {
					line, err := rd.ReadString('\n')
					if err != nil {
						return
					}
					applied.Add(1)
					if _, err := io.WriteString(c, "ok "+line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), applied
}

func roundTrip(c net.Conn, line string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE)
}

func TestForwardsAndCuts(t *testing.T) {
	target, applied := lineServer(t)
	p, err := faultproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(c, "a"); err != nil || got != "ok a\n" {
		t.Fatalf("through the proxy: %q %v", got, err)
	}

	// CutAll: the live connection is reset under the client.
	if n := p.CutAll(); n != 1 {
		t.Fatalf("CutAll cut %d connections, want 1", n)
	}
	if _, err := roundTrip(c, "b"); err == nil || !isReset(err) {
		t.Fatalf("after CutAll: err = %v, want a reset", err)
	}

	// An armed cut: the request reaches the server (applied), the reply
	// does not reach the client.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	before := applied.Load()
	p.CutAfterNextRequests(1)
	if got, err := roundTrip(c2, "commit"); err == nil {
		t.Fatalf("armed cut: the client got the reply %q", got)
	}
	deadline := time.Now().Add(3 * time.Second)
	for applied.Load() == before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if applied.Load() != before+1 {
		t.Fatalf("armed cut: the server applied %d requests, want 1", applied.Load()-before)
	}
	if p.Armed() != 0 {
		t.Fatalf("armed cuts left: %d", p.Armed())
	}

	// Refuse: new connections are reset at once.
	p.Refuse(true)
	c3, err := net.Dial("tcp", p.Addr())
	if err == nil {
		_, err = roundTrip(c3, "x")
		c3.Close()
	}
	if err == nil {
		t.Fatal("a refused connection carried a request")
	}
	p.Refuse(false)
	c4, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	if got, err := roundTrip(c4, "d"); err != nil || got != "ok d\n" {
		t.Fatalf("after Refuse(false): %q %v", got, err)
	}
	// A cut is counted by the connection's own goroutine: give it a moment.
	accepted, cut := p.Stats()
	for deadline := time.Now().Add(3 * time.Second); (accepted != 4 || cut != 2) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		accepted, cut = p.Stats()
	}
	if accepted != 4 || cut != 2 {
		t.Fatalf("stats: accepted %d cut %d, want 4 and 2", accepted, cut)
	}
}

// Close leaves no goroutine behind (TestMain checks) even with live
// connections, and a second Close is harmless.
func TestCloseWithLiveConnections(t *testing.T) {
	target, _ := lineServer(t)
	p, err := faultproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := roundTrip(c, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_ = p.Close()
}
