package proxy_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// done writes its line to the handler itself (no Logger.LogAttrs): a
// handler that shows the source still gets done's call site, on every
// line, and the line keeps its fields.
func TestDeliveryLineSource(t *testing.T) {
	site := proxytest.NewSite(t, nil)
	u, _ := url.Parse(site.URL)
	c, err := contract.Parse([]byte(`
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	px, err := proxy.New(proxy.Options{Upstream: u, Contract: c, Store: newStore(t),
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{AddSource: true}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close(context.Background()) })
	for _, id := range []string{"a", "a", "b"} {
		r := httptest.NewRequest(http.MethodPost, "http://shop.example/hooks/shop", strings.NewReader(`{}`))
		r.Header.Set("X-Event-Id", id)
		px.ServeHTTP(httptest.NewRecorder(), r)
	}
	lines := webhookLines(t, logs.String())
	if len(lines) != 3 {
		t.Fatalf("%d webhook lines, want 3:\n%s", len(lines), logs.String())
	}
	for i, l := range lines {
		src, _ := l["source"].(map[string]any)
		if fn, _ := src["function"].(string); fn != "github.com/hookonce/hookonce/proxy.(*delivery).done" {
			t.Errorf("line %d: source %v, want proxy.(*delivery).done", i, l["source"])
		}
		if file, _ := src["file"].(string); !strings.HasSuffix(file, "proxy/serve.go") {
			t.Errorf("line %d: source file %v, want proxy/serve.go", i, src["file"])
		}
		for _, k := range []string{"time", "level", "sender", "key", "outcome", "status", "duration_ms"} {
			if _, ok := l[k]; !ok {
				t.Errorf("line %d has no %s: %v", i, k, l)
			}
		}
	}
	if lines[1]["outcome"] != "duplicate" || lines[2]["outcome"] != "processed" {
		t.Errorf("outcomes %v, %v; want duplicate, processed", lines[1]["outcome"], lines[2]["outcome"])
	}
}
