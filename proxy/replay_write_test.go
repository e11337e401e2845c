package proxy_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// writeCounter is a listener whose connections count their Write calls.
type writeCounter struct {
	net.Listener
	writes atomic.Int64
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, n: &l.writes}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// A replayed answer, headers and body, reaches the sender in one write
// to its connection (one packet for a small answer), from the replay
// cache or the store alike; and the site ran once.
func TestReplayOneWrite(t *testing.T) {
	up := proxytest.NewSite(t, nil)
	in := proxytest.Start(t, newStore(t), up.URL, shopConfig)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	counted := &writeCounter{Listener: ln}
	srv := &http.Server{Handler: in.Proxy}
	go func() { _ = srv.Serve(counted) }()
	t.Cleanup(func() { srv.Close() })

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	body := `{"id":"evt_one_write","amount":100}`
	send := func() *http.Response {
		t.Helper()
		if _, err := fmt.Fprintf(c, "POST /hooks/shop HTTP/1.1\r\nHost: shop.example\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		if _, err := bufio.NewReader(resp.Body).WriteTo(&sb); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := send(); resp.StatusCode != 200 || resp.Header.Get(proxy.ReplayHeader) != "" {
		t.Fatalf("first delivery: %d, replayed %q", resp.StatusCode, resp.Header.Get(proxy.ReplayHeader))
	}
	for i := range 3 {
		before := counted.writes.Load()
		resp := send()
		if resp.StatusCode != 200 || resp.Header.Get(proxy.ReplayHeader) != "true" {
			t.Fatalf("repeat %d: %d, replayed %q", i, resp.StatusCode, resp.Header.Get(proxy.ReplayHeader))
		}
		if n := counted.writes.Load() - before; n != 1 {
			t.Errorf("repeat %d: the replay took %d writes to the sender's connection, want 1", i, n)
		}
	}
	if n := up.Executions("evt_one_write"); n != 1 {
		t.Fatalf("the site ran %d times, want 1", n)
	}
}
