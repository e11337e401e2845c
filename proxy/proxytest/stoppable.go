package proxytest

import (
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
)

// Stoppable stands in front of a counting Site and can be stopped, so
// that its address refuses connections as a site that is down does, and
// started again on the same address.
type Stoppable struct {
	*Site
	URL string // the address to forward to: the Site behind the stop switch

	t      testing.TB
	addr   string
	mu     sync.Mutex
	ln     net.Listener // nil while stopped
	conns  map[net.Conn]bool
	closed bool
}

// NewStoppableSite starts a counting site (h as for NewSite) behind a
// switch, running.
func NewStoppableSite(t testing.TB, h http.HandlerFunc) *Stoppable {
	t.Helper()
	st := &Stoppable{Site: NewSite(t, h), t: t, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st.addr = ln.Addr().String()
	st.URL = "http://" + st.addr
	st.serve(ln)
	t.Cleanup(func() {
		st.mu.Lock()
		st.closed = true
		st.mu.Unlock()
		st.Stop()
	})
	return st
}

// Stop closes the listener and every connection: the site is down.
func (st *Stoppable) Stop() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ln != nil {
		st.ln.Close()
		st.ln = nil
	}
	for c := range st.conns {
		c.Close()
		delete(st.conns, c)
	}
}

// Start listens again on the same address.
func (st *Stoppable) Start() {
	st.t.Helper()
	ln, err := net.Listen("tcp", st.addr)
	if err != nil {
		st.t.Fatalf("site start again on %s: %v", st.addr, err)
	}
	st.serve(ln)
}

func (st *Stoppable) serve(ln net.Listener) {
	st.mu.Lock()
	st.ln = ln
	st.mu.Unlock()
	target := st.Site.Listener.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			st.mu.Lock()
			if st.closed || st.ln != ln {
				st.mu.Unlock()
				c.Close()
				return
			}
			st.conns[c] = true
			st.mu.Unlock()
			go st.pipe(c, target)
		}
	}()
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
