package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe/cache"
	"github.com/hookonce/hookonce/proxy"
)

// The handler's own work per delivery as serve runs it by default: the
// text log at info (to io.Discard: the write itself is the kernel's), the
// replay cache over SQLite, a kept connection to a site that answers from
// fixed bytes, a ~1 KB JSON body. The handler is called directly with a
// reused request, so what is measured is hookonce's handler alone, not
// net/http's server. Its instruction count is repeatable whatever the
// machine's load:
//
//	go test -c -o proxy.test ./proxy
//	valgrind --tool=callgrind --toggle-collect='*proxy.(*Proxy).ServeHTTP' \
//	  ./proxy.test -test.run '^$' -test.bench 'HandlerDelivery/duplicate' -test.benchtime 20000x
func BenchmarkHandlerDelivery(b *testing.B) {
	c, err := contract.Parse([]byte(`
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
`), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	store := cache.New(newBenchStore(b), cache.Options{Size: 10000, TTL: time.Minute})
	px, err := proxy.New(proxy.Options{Upstream: fixedBenchSite(b), Contract: c, Store: store, KeepIdle: proxy.DefaultKeepIdle,
		Logger: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = px.Close(context.Background()) })
	q := newBenchRequest()
	b.Run("duplicate", func(b *testing.B) {
		q.deliver(b, px, "dup", false)
		b.ReportAllocs()
		for b.Loop() {
			q.deliver(b, px, "dup", true)
		}
	})
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			q.deliver(b, px, "new-"+strconv.Itoa(i), false)
		}
	})
}

// benchBody is a ~1 KB JSON webhook, the size bench/compare's deploy mode sends.
var benchBody = `{"type":"order.paid","object":{"id":"ord_1042","amount":10000,"currency":"rub","customer":"cus_77","note":"` +
	strings.Repeat("x", 900) + `"}}`

type benchRequest struct {
	req  *http.Request
	body *bytes.Reader
	w    *benchWriter
}

func newBenchRequest() *benchRequest {
	q := &benchRequest{body: bytes.NewReader([]byte(benchBody)), w: &benchWriter{h: http.Header{}}}
	q.req, _ = http.NewRequest(http.MethodPost, "http://shop.example/hooks/shop", q.body)
	q.req.RemoteAddr = "203.0.113.9:4711"
	q.req.Header.Set("Content-Type", "application/json")
	q.req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	return q
}

func (q *benchRequest) deliver(b testing.TB, px *proxy.Proxy, key string, replayed bool) {
	q.body.Reset([]byte(benchBody))
	q.req.Body = io.NopCloser(q.body)
	q.req.ContentLength = int64(len(benchBody))
	q.req.Header["X-Event-Id"] = []string{key}
	clear(q.w.h)
	q.w.code = 0
	px.ServeHTTP(q.w, q.req)
	if q.w.code != http.StatusOK {
		b.Fatalf("%s: status %d", key, q.w.code)
	}
	if got := q.w.h.Get(proxy.ReplayHeader) == "true"; got != replayed {
		b.Fatalf("%s: replayed=%v, want %v", key, got, replayed)
	}
}

// benchWriter keeps the status and headers and drops the body; it takes
// the deadlines the proxy sets, as net/http's own writer does.
type benchWriter struct {
	h    http.Header
	code int
}

func (w *benchWriter) Header() http.Header { return w.h }
func (w *benchWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return len(p), nil
}
func (w *benchWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *benchWriter) SetReadDeadline(time.Time) error  { return nil }
func (w *benchWriter) SetWriteDeadline(time.Time) error { return nil }

// fixedBenchSite is a loopback HTTP/1.1 site answering every request 200
// from fixed bytes on the same connection.
func fixedBenchSite(b testing.TB) *url.URL {
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
					n := 0
					for {
						line, err := br.ReadSlice('\n')
						if err != nil {
							return
						}
						line = bytes.TrimRight(line, "\r\n")
						if len(line) == 0 {
							break
						}
						if k, v, ok := bytes.Cut(line, []byte(":")); ok && strings.EqualFold(string(k), "Content-Length") {
							n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
						}
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
