package proxytest

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// Stoppable stands in front of a counting Site and can be stopped, so
// that a request sent to it never reaches the site (every connection is
// reset as soon as it is accepted, before any byte is read), and started
// again. It keeps its port all along: a port given back could be taken by
// another test's listener before the site starts again.
type Stoppable struct {
	*Site
	URL string // the address to forward to: the Site behind the stop switch

	down  atomic.Bool
	ln    net.Listener
	mu    sync.Mutex
	conns map[net.Conn]bool
}

// NewStoppableSite starts a counting site (h as for NewSite) behind a
// switch, running.
func NewStoppableSite(t testing.TB, h http.HandlerFunc) *Stoppable {
	t.Helper()
	st := &Stoppable{Site: NewSite(t, h), conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st.ln = ln
	st.URL = "http://" + ln.Addr().String()
	target := st.Site.Listener.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if st.down.Load() {
				reset(c)
				continue
			}
			st.mu.Lock()
			st.conns[c] = true
			st.mu.Unlock()
			go st.pipe(c, target)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		st.Stop()
	})
	return st
}

// Stop resets every open connection and every new one: the site is down.
func (st *Stoppable) Stop() {
	st.down.Store(true)
	st.mu.Lock()
	defer st.mu.Unlock()
	for c := range st.conns {
		reset(c)
		delete(st.conns, c)
	}
}

// Start lets connections through to the site again.
func (st *Stoppable) Start() { st.down.Store(false) }

// reset closes c with SO_LINGER 0: the peer gets a RST, not a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (st *Stoppable) pipe(c net.Conn, target string) {
	defer func() {
		st.mu.Lock()
		delete(st.conns, c)
		st.mu.Unlock()
		c.Close()
	}()
	back, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer back.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(back, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, back); done <- struct{}{} }()
	<-done
}
