package proxy_test

import (
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/hookonce/hookonce/proxy/proxytest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// The counters an operator alerts on, after a fixed sequence of
// deliveries, against testdata/metrics/decisions.txt (go test -update
// rewrites it). Durations are left out: they vary run to run.
func TestMetricsGolden(t *testing.T) {
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("X-Event-Id"), "fail") {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	t.Setenv("GOLDEN_SECRET", "s")
	px := proxytest.Start(t, newStore(t), site.URL, `
max_body: 1KiB
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
  - name: signed
    match: { path: /hooks/signed }
    key: [ { header: X-Event-Id } ]
    signature: { scheme: hmac-sha256, header: X-Sig, secret_env: GOLDEN_SECRET }
`)
	for _, d := range []struct{ path, id, body string }{
		{"/hooks/shop", "e1", "{}"},                       // processed
		{"/hooks/shop", "e1", "{}"},                       // duplicate
		{"/hooks/shop", "e1", `{"x":1}`},                  // conflict
		{"/hooks/shop", "fail", "{}"},                     // released
		{"/hooks/shop", "", "{}"},                         // missing_key
		{"/hooks/shop", "big", strings.Repeat("x", 2000)}, // too_large
		{"/hooks/signed", "s1", "{}"},                     // rejected_signature
	} {
		h := []string{}
		if d.id != "" {
			h = append(h, "X-Event-Id", d.id)
		}
		proxytest.Post(t, px.URL+d.path, d.body, h...)
	}
	send(t, px.Server, "PUT", "/hooks/shop", "{}") // unmatched (405)

	golden := filepath.Join("testdata", "metrics", "decisions.txt")
	names := []string{"hookonce_requests_total", "hookonce_inflight", "hookonce_answers_not_stored_total"}
	if *update {
		got, err := px.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, mf := range got {
			for _, n := range names {
				if mf.GetName() == n {
					if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(golden)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := testutil.GatherAndCompare(px.Registry, f, names...); err != nil {
		t.Fatal(err)
	}
}
