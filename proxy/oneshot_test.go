package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rawSite accepts connections on loopback and runs handle on each; it
// counts the connections.
func rawSite(t *testing.T, handle func(c net.Conn, br *bufio.Reader)) (addr string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				handle(c, bufio.NewReader(c))
			}()
		}
	}()
	return ln.Addr().String(), conns
}

func oneShotRequest(t *testing.T, ctx context.Context, addr, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/hook", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.GetBody = nil
	return req
}

// Each request has a connection of its own, says Connection: close, and
// arrives byte for byte; an informational answer before the real one is
// skipped.
func TestOneShotOneConnectionPerRequest(t *testing.T) {
	var closeHeaders atomic.Int64
	addr, conns := rawSite(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(req.Body)
		if req.Close {
			closeHeaders.Add(1)
		}
		_, _ = io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
		_, _ = io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Length: "+strconv.Itoa(len(b))+"\r\n\r\n"+string(b))
	})
	o := &oneShot{dialer: newDialer(), maxHeader: oneShotMaxHeader}
	const n = 5
	for i := range n {
		var wrote atomic.Bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{WroteRequest: func(w httptrace.WroteRequestInfo) {
			wrote.Store(w.Err == nil)
		}})
		body := strings.Repeat("x", 1000+i)
		resp, err := o.RoundTrip(oneShotRequest(t, ctx, addr, body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 || string(got) != body || !wrote.Load() {
			t.Fatalf("request %d: %d, %d bytes back, wrote %v", i, resp.StatusCode, len(got), wrote.Load())
		}
	}
	if conns.Load() != n || closeHeaders.Load() != n {
		t.Fatalf("%d requests on %d connections, %d with Connection: close", n, conns.Load(), closeHeaders.Load())
	}
}

// A site that never answers is given up when the forward's context ends,
// with the context's error, and the connection is closed.
func TestOneShotContextEnds(t *testing.T) {
	closed := make(chan struct{})
	addr, _ := rawSite(t, func(c net.Conn, br *bufio.Reader) {
		_, _ = http.ReadRequest(br)
		_, _ = io.Copy(io.Discard, br) // until hookonce closes
		close(closed)
	})
	o := &oneShot{dialer: newDialer(), maxHeader: oneShotMaxHeader}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := o.RoundTrip(oneShotRequest(t, ctx, addr, "{}"))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("err %v after %s, want the deadline at once", err, time.Since(start))
	}
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("connection left open")
	}
}

// An answer whose header block never ends is refused at the bound, not
// held in memory.
func TestOneShotHeaderBound(t *testing.T) {
	addr, _ := rawSite(t, func(c net.Conn, br *bufio.Reader) {
		_, _ = http.ReadRequest(br)
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Pad: " + strings.Repeat("a", 1000) + "\r\n"
		for range 200 {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	})
	o := &oneShot{dialer: newDialer(), maxHeader: 64 << 10}
	_, err := o.RoundTrip(oneShotRequest(t, context.Background(), addr, "{}"))
	if err == nil || !strings.Contains(err.Error(), "bytes of headers") {
		t.Fatalf("err %v, want the header bound", err)
	}
}

// A site that is not listening: a dial error (unreachable), and nothing
// was written.
func TestOneShotRefusedIsADialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: refused
	var called atomic.Bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		called.Store(true)
	}})
	o := &oneShot{dialer: newDialer(), maxHeader: oneShotMaxHeader}
	_, err = o.RoundTrip(oneShotRequest(t, ctx, addr, "{}"))
	if err == nil || !isDialError(err) || called.Load() {
		t.Fatalf("err %v (dial error %v), WroteRequest called %v", err, isDialError(err), called.Load())
	}
}

// One webhook forward through oneShot to a loopback site: dial, write,
// read the answer, close.
//
//	go test ./proxy -run '^$' -bench OneShot -benchmem
func BenchmarkOneShot(b *testing.B) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer site.Close()
	addr := strings.TrimPrefix(site.URL, "http://")
	body := strings.Repeat("x", 1024)
	o := &oneShot{dialer: newDialer(), maxHeader: oneShotMaxHeader}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req, _ := http.NewRequest("POST", "http://"+addr+"/hook", strings.NewReader(body))
		resp, err := o.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
