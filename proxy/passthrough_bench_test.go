package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/proxy/proxytest"
)

// Pass-through (a path no sender names) against a bare ReverseProxy to the
// same site, in process: what hookonce adds to the site's own traffic.
//
//	go test ./proxy -run '^$' -bench PassThrough -benchmem
func BenchmarkPassThrough(b *testing.B) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer site.Close()
	body := strings.Repeat("x", 1024)
	u, _ := url.Parse(site.URL)
	bare := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() }}
	px := proxytest.Start(b, newBenchStore(b), site.URL, shopConfig)
	for _, tt := range []struct {
		name string
		h    http.Handler
	}{{"bare", bare}, {"hookonce", px.Proxy}} {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := httptest.NewRequest("POST", "http://shop.example/catalog/item.php?id=7", strings.NewReader(body))
					r.RemoteAddr = "203.0.113.9:4711"
					w := httptest.NewRecorder()
					tt.h.ServeHTTP(w, r)
					if w.Code != 200 {
						b.Fatalf("status %d", w.Code)
					}
				}
			})
		})
	}
}
