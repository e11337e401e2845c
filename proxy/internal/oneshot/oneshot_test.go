package oneshot

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
	"syscall"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/tcpsite"
)

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
	addr, conns := tcpsite.Start(t, func(c net.Conn, br *bufio.Reader) {
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
	o := New((&net.Dialer{}).DialContext, 0)
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
	addr, _ := tcpsite.Start(t, func(c net.Conn, br *bufio.Reader) {
		_, _ = http.ReadRequest(br)
		_, _ = io.Copy(io.Discard, br) // until hookonce closes
		close(closed)
	})
	o := New((&net.Dialer{}).DialContext, 0)
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
	addr, _ := tcpsite.Start(t, func(c net.Conn, br *bufio.Reader) {
		_, _ = http.ReadRequest(br)
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Pad: " + strings.Repeat("a", 1000) + "\r\n"
		for range 200 {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	})
	o := &Transport{dial: (&net.Dialer{}).DialContext, maxHeader: 64 << 10}
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
	o := New((&net.Dialer{}).DialContext, 0)
	_, err = o.RoundTrip(oneShotRequest(t, ctx, addr, "{}"))
	if err == nil || !dialFailed(err) || called.Load() {
		t.Fatalf("err %v (dial error %v), WroteRequest called %v", err, dialFailed(err), called.Load())
	}
}

// writeFails passes limit bytes of writes to its connection, then fails
// them, as a connection the site reset does; reads are untouched.
type writeFails struct {
	net.Conn
	limit int
}

func (c *writeFails) Write(p []byte) (int, error) {
	if len(p) <= c.limit {
		n, err := c.Conn.Write(p)
		c.limit -= n
		return n, err
	}
	n, _ := c.Conn.Write(p[:c.limit])
	c.limit -= n
	return n, syscall.ECONNRESET
}

// pipeSite is a site on the far end of an in-memory connection whose
// writes fail after limit bytes: it reads the request's headers, then runs
// answer (nil: keeps the connection open and silent).
func pipeSite(t *testing.T, limit int, answer func(c net.Conn)) *Transport {
	t.Helper()
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	go func() {
		br := bufio.NewReader(server)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		if answer != nil {
			answer(server)
		}
		_, _ = io.Copy(io.Discard, br) // until the client closes
	}()
	return &Transport{
		dial: func(context.Context, string, string) (net.Conn, error) {
			return &writeFails{Conn: client, limit: limit}, nil
		},
		maxHeader: oneShotMaxHeader,
	}
}

func sendErrorOf(t *testing.T, err error) *SendError {
	t.Helper()
	var se *SendError
	if !errors.As(err, &se) {
		t.Fatalf("err %v (%T) carries no SendError", err, err)
	}
	return se
}

// The write fails after the headers left; the site's answer, already
// sent, is read and returned: it is the site's answer.
func TestOneShotEarlyAnswerAfterFailedWrite(t *testing.T) {
	o := pipeSite(t, 300, func(c net.Conn) {
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone")
	})
	var writeErr atomic.Bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{WroteRequest: func(w httptrace.WroteRequestInfo) {
		writeErr.Store(w.Err != nil)
	}})
	resp, err := o.RoundTrip(oneShotRequest(t, ctx, "site.test", strings.Repeat("x", 100<<10)))
	if err != nil {
		t.Fatalf("err %v, want the site's answer", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "done" || err != nil {
		t.Fatalf("%d %q %v, want 200 done", resp.StatusCode, b, err)
	}
	if !writeErr.Load() {
		t.Fatal("WroteRequest reported no error: the write did not fail, the test proves nothing")
	}
}

// Nothing was written: the site cannot have seen the request, no answer
// is waited for, and the error says so (unreachable).
func TestOneShotNothingWritten(t *testing.T) {
	o := pipeSite(t, 0, nil)
	o.grace = time.Hour // would hang if an answer were waited for
	_, err := o.RoundTrip(oneShotRequest(t, context.Background(), "site.test", "{}"))
	if se := sendErrorOf(t, err); se.Written != 0 || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("err %v, written %d: want the write error, nothing written", err, se.Written)
	}
}

// The write failed after the headers left and the site says nothing: the
// answer is waited for no longer than the grace, then the error carries
// what was written (ambiguous, never unreachable).
func TestOneShotNoAnswerAfterFailedWrite(t *testing.T) {
	o := pipeSite(t, 300, nil)
	o.grace = 150 * time.Millisecond
	start := time.Now()
	_, err := o.RoundTrip(oneShotRequest(t, context.Background(), "site.test", strings.Repeat("x", 10<<10)))
	took := time.Since(start)
	se := sendErrorOf(t, err)
	if se.Written != 300 || !errors.Is(err, syscall.ECONNRESET) || !strings.Contains(err.Error(), "no answer could be read: read pipe: i/o timeout") {
		t.Fatalf("err %v, written %d: want the write error, 300 bytes, the grace's deadline", err, se.Written)
	}
	if took < 100*time.Millisecond || took > 2*time.Second {
		t.Fatalf("gave up after %s, want about the 150ms grace", took)
	}
}

// The forward's deadline bounds the grace: the context's error, and what
// was written.
func TestOneShotGraceEndsAtTheDeadline(t *testing.T) {
	o := pipeSite(t, 300, nil)
	o.grace = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := o.RoundTrip(oneShotRequest(t, ctx, "site.test", strings.Repeat("x", 10<<10)))
	took := time.Since(start)
	if se := sendErrorOf(t, err); se.Written != 300 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, written %d: want the deadline, 300 bytes", err, se.Written)
	}
	if took > 2*time.Second {
		t.Fatalf("gave up after %s, want the 200ms deadline", took)
	}
}

// A real site that reads the headers, answers and closes with 900 KB
// unread (the kernel resets the connection under the write): the answer.
func TestOneShotEarlyAnswerRealSocket(t *testing.T) {
	addr, _ := tcpsite.Start(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 202 Accepted\r\nContent-Length: 4\r\n\r\ndone")
	})
	for i := range 20 {
		var writeErr atomic.Bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{WroteRequest: func(w httptrace.WroteRequestInfo) {
			writeErr.Store(w.Err != nil)
		}})
		resp, err := New((&net.Dialer{}).DialContext, 0).RoundTrip(oneShotRequest(t, ctx, addr, strings.Repeat("x", 900<<10)))
		if err != nil {
			t.Fatalf("request %d: %v, want the site's answer", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 202 || string(b) != "done" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, b)
		}
		if i == 0 && !writeErr.Load() {
			t.Log("the write did not fail: the early answer was read as a normal one")
		}
	}
}

// One 1 KiB webhook forward through Transport to a loopback site: /fresh
// dials a connection for each, writes, reads the answer and closes; /kept
// reuses the last connection (trap 32).
//
//	go test ./proxy/internal/oneshot -run '^$' -bench OneShot -benchmem
func BenchmarkOneShot(b *testing.B) {
	b.Run("fresh", func(b *testing.B) { benchOneShot(b, 0) })
	b.Run("kept", func(b *testing.B) { benchOneShot(b, 500*time.Millisecond) })
}

func benchOneShot(b *testing.B, keepIdle time.Duration) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer site.Close()
	addr := strings.TrimPrefix(site.URL, "http://")
	body := strings.Repeat("x", 1024)
	o := New((&net.Dialer{}).DialContext, keepIdle)
	defer o.CloseIdle()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		// As ReverseProxy hands it on: wrapped, not a known in-memory reader.
		req, _ := http.NewRequest("POST", "http://"+addr+"/hook", struct{ io.Reader }{strings.NewReader(body)})
		req.ContentLength = int64(len(body))
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

// A kept connection that no webhook takes again is closed once it has
// waited keepIdle: none lingers (in CLOSE_WAIT, after the site's own idle
// timeout) when webhooks stop coming.
func TestOneShotKeptConnectionsExpire(t *testing.T) {
	closed := make(chan struct{})
	addr, _ := tcpsite.Start(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		if _, err := br.ReadByte(); err == io.EOF {
			close(closed) // hookonce closed it
		}
	})
	o := New((&net.Dialer{}).DialContext, 50*time.Millisecond)
	defer o.CloseIdle()
	resp, err := o.RoundTrip(oneShotRequest(t, context.Background(), addr, "{}"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the kept connection was still open 5 s after it was last used")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.idle) != 0 || o.sweep != nil {
		t.Fatalf("%d connections kept, sweep %v", len(o.idle), o.sweep != nil)
	}
}

// dialFailed: err is the dial's own (proxy's classify takes it for
// unreachable), carrying no SendError.
func dialFailed(err error) bool {
	var op *net.OpError
	var se *SendError
	return errors.As(err, &op) && op.Op == "dial" && !errors.As(err, &se)
}
