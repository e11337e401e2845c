package admin_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// parseDur reads a duration as the page prints it (time.Duration's text).
func parseDur(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return d
}

// The site answers every delivery in 12-15 ms: all of them fall in the
// 10-25 ms bucket. Both latency lines describe the same deliveries here
// (the process started inside the window), so neither may show a p50 or
// p95 above the longest delivery: the since-start line once estimated up
// to the bucket's bound (24 ms) from the histogram, above the window's
// exact maximum shown just above it.
func TestOverviewPercentilesNeverAboveTheMax(t *testing.T) {
	store := openStore(t)
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(12 * time.Millisecond)
		_, _ = w.Write([]byte("ok"))
	})
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
`)
	for i := range 4 {
		if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"e`+strconv.Itoa(i)+`"}`); r.Status != 200 {
			t.Fatalf("delivery %d: %d", i, r.Status)
		}
	}
	if n := site.Total(); n != 4 {
		t.Fatalf("the site ran %d times, want 4", n)
	}
	h, err := admin.New(admin.Options{Store: store, Gatherer: px.Registry, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	adm := httptest.NewServer(h)
	defer adm.Close()
	status, _, body := get(t, adm.URL+"/ui/overview", nil, "")
	if status != 200 {
		t.Fatalf("overview: %d\n%s", status, body)
	}
	line := regexp.MustCompile(`class="latency-(window|started)">4 at the site · mean (\S+) · p50 ≈ (\S+) · p95 ≈ (\S+) · max (\S+)</dd>`)
	got := map[string][]time.Duration{}
	for _, m := range line.FindAllStringSubmatch(body, -1) {
		got[m[1]] = []time.Duration{parseDur(t, m[2]), parseDur(t, m[3]), parseDur(t, m[4]), parseDur(t, m[5])}
	}
	if len(got) != 2 {
		t.Fatalf("want both latency lines with a max, got %v:\n%s", got, body[strings.Index(body, `class="latency"`):])
	}
	win, started := got["window"], got["started"]
	if win[3] != started[3] {
		t.Errorf("max: window %v, since start %v: the same deliveries", win[3], started[3])
	}
	for name, l := range got {
		mean, p50, p95, longest := l[0], l[1], l[2], l[3]
		if longest < 12*time.Millisecond {
			t.Errorf("%s: max %v, below the site's 12 ms", name, longest)
		}
		if p50 > p95 || p95 > longest || mean > longest {
			t.Errorf("%s: mean %v, p50 %v, p95 %v, max %v: a percentile above the max", name, mean, p50, p95, longest)
		}
		if p95 > win[3] {
			t.Errorf("%s: p95 %v above the window's exact max %v", name, p95, win[3])
		}
	}
}
