package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/benchrig"
	"github.com/hookonce/hookonce/proxy/internal/oneshot"
)

// The claimed forward alone: siteCall.forward over oneshot, on a kept
// connection, to a loopback site in this process that answers fixed
// bytes and allocates nothing per request (benchrig.FixedSite; its CPU
// is counted, its allocations are none). A Stripe-like
// delivery: 8 headers, a 1 KB JSON body.
//
//	go test ./proxy -run '^$' -bench SiteCall -benchmem -cpu 1
//
// Under callgrind (GODEBUG=asyncpreemptoff=1, 4000 minus 2000 forwards)
// it is repeatable to a few hundred instructions, where the delivery
// benchmarks are not (their stores' and counters' timers run by the
// wall clock).
func BenchmarkSiteCallForward(b *testing.B) {
	site := benchrig.FixedSite(b)
	sc := &siteCall{site: site, rt: oneshot.New(newDialer().DialContext, 500*time.Millisecond), direct: true,
		client: func(r *http.Request) (string, bool) { return peerIP(r.RemoteAddr), false }}
	body := []byte(`{"id":"evt_1","type":"payment.succeeded","data":{"amount":1000,"currency":"usd","pad":"` + strings.Repeat("x", 900) + `"}}`)
	in, _ := http.NewRequest(http.MethodPost, "http://shop.example/hooks/shop", nil)
	in.RemoteAddr = "127.0.0.1:40000"
	in.Header = http.Header{
		"Content-Type":     {"application/json"},
		"User-Agent":       {"Stripe/1.0 (+https://stripe.com/docs/webhooks)"},
		"Stripe-Signature": {"t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd"},
		"Accept":           {"*/*; q=0.5, application/xml"},
		"Cache-Control":    {"no-cache"},
		"Accept-Encoding":  {"gzip"},
		"X-Event-Id":       {"evt_1"},
		"Content-Length":   {"1000"},
	}
	in.ContentLength = int64(len(body))
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c := newCapture(nil, 64<<10)
		sc.forward(oneshot.BeforeWrite(ctx, oneshot.CheckFunc(func() error { return nil })), in, body, "Idempotency-Key", "shop:evt_1", c)
		cancel()
		if c.status != http.StatusOK || c.failure() != nil {
			b.Fatal(c.status, c.failure())
		}
	}
	sc.rt.(*oneshot.Transport).CloseIdle()
}
