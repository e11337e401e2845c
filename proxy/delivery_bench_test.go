package proxy_test

import (
	"context"
	"io"
	"log/slog"
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
	q := benchrig.NewRequest(benchBody)
	// -count runs each sub-benchmark again on the same proxy and store:
	// every run takes keys of its own, or its first delivery is a replay.
	run := 0
	b.Run("duplicate", func(b *testing.B) {
		run++
		key := "dup-" + strconv.Itoa(run)
		q.Deliver(b, px, proxy.ReplayHeader, key, false)
		b.ReportAllocs()
		for b.Loop() {
			q.Deliver(b, px, proxy.ReplayHeader, key, true)
		}
	})
	b.Run("new", func(b *testing.B) {
		run++
		prefix := "new-" + strconv.Itoa(run) + "-"
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			q.Deliver(b, px, proxy.ReplayHeader, prefix+strconv.Itoa(i), false)
		}
	})
}

// benchBody is a ~1 KB JSON webhook, the size bench/compare's deploy mode sends.
var benchBody = `{"type":"order.paid","object":{"id":"ord_1042","amount":10000,"currency":"rub","customer":"cus_77","note":"` +
	strings.Repeat("x", 900) + `"}}`
