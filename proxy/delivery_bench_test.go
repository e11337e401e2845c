package proxy_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe/cache"
	"github.com/hookonce/hookonce/internal/testkit/benchrig"
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
	px, err := proxy.New(proxy.Options{Upstream: benchrig.FixedSite(b), Contract: c, Store: store, KeepIdle: proxy.DefaultKeepIdle,
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
	w    *benchrig.Writer
}

func newBenchRequest() *benchRequest {
	q := &benchRequest{body: bytes.NewReader([]byte(benchBody)), w: &benchrig.Writer{H: http.Header{}}}
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
	clear(q.w.H)
	q.w.Code = 0
	px.ServeHTTP(q.w, q.req)
	if q.w.Code != http.StatusOK {
		b.Fatalf("%s: status %d", key, q.w.Code)
	}
	if got := q.w.H.Get(proxy.ReplayHeader) == "true"; got != replayed {
		b.Fatalf("%s: replayed=%v, want %v", key, got, replayed)
	}
}
