// Package benchrig holds what the delivery benchmarks share: a response
// writer and a loopback site that allocate nothing per request, so that
// a benchmark's allocations are the proxy's.
package benchrig

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// Writer is a ResponseWriter that keeps the status and headers and
// drops the body, allocating nothing of its own.
type Writer struct {
	H    http.Header
	Code int
}

func (w *Writer) Header() http.Header { return w.H }
func (w *Writer) Write(p []byte) (int, error) {
	if w.Code == 0 {
		w.Code = http.StatusOK
	}
	return len(p), nil
}

// SetReadDeadline and SetWriteDeadline take the deadlines the proxy sets,
// as net/http's own writer does (http.ResponseController).
func (w *Writer) SetReadDeadline(time.Time) error  { return nil }
func (w *Writer) SetWriteDeadline(time.Time) error { return nil }

func (w *Writer) WriteHeader(code int) {
	if w.Code == 0 {
		w.Code = code
	}
}

// FixedSite is a loopback HTTP/1.1 site that reads each request's head
// and body and answers 200 with a fixed JSON body on the same connection,
// from fixed bytes: it allocates nothing per request, so a benchmark's
// allocations are the proxy's.
func FixedSite(b testing.TB) *url.URL {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReaderSize(c, 8<<10)
				for {
					n, ok := readHead(br)
					if !ok {
						return
					}
					if _, err := br.Discard(n); err != nil {
						return
					}
					if _, err := c.Write(answer); err != nil {
						return
					}
				}
			}()
		}
	}()
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}
}

// readHead reads a request's head and returns its Content-Length.
func readHead(br *bufio.Reader) (int, bool) {
	n := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0, false
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			return n, true
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && len(k) == len("Content-Length") && bytes.EqualFold(k, []byte("Content-Length")) {
			n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
}

// Request is one webhook POST to /hooks/shop, keyed by X-Event-Id, with
// its response writer, reused for every call of one goroutine so that the
// rig allocates nothing of its own per request.
type Request struct {
	req  *http.Request
	body *bytes.Reader
	raw  []byte
	w    *Writer
}

// NewRequest makes a Request carrying body.
func NewRequest(body string) *Request {
	q := &Request{raw: []byte(body), w: &Writer{H: http.Header{}}}
	q.body = bytes.NewReader(q.raw)
	q.req, _ = http.NewRequest(http.MethodPost, "http://shop.example/hooks/shop", q.body)
	q.req.RemoteAddr = "203.0.113.9:4711"
	q.req.Header.Set("Content-Type", "application/json")
	q.req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	return q
}

// Deliver sends the request under key to h and fails tb unless it is
// answered 200, replayed (replayHeader: true) or not as replayed says.
func (q *Request) Deliver(tb testing.TB, h http.Handler, replayHeader, key string, replayed bool) {
	q.body.Reset(q.raw)
	q.req.Body = io.NopCloser(q.body)
	q.req.ContentLength = int64(len(q.raw))
	q.req.Header["X-Event-Id"] = []string{key}
	clear(q.w.H)
	q.w.Code = 0
	h.ServeHTTP(q.w, q.req)
	if q.w.Code != http.StatusOK {
		tb.Fatalf("%s: status %d", key, q.w.Code)
	}
	if got := q.w.H.Get(replayHeader) == "true"; got != replayed {
		tb.Fatalf("%s: replayed=%v, want %v", key, got, replayed)
	}
}
