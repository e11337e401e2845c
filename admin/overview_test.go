package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// overviewCategories maps the outcomes of hookonce_requests_total to the
// page's rows, independently of admin's own table.
var overviewCategories = map[string][]string{
	"processed":   {proxy.OutcomeProcessed},
	"duplicate":   {proxy.OutcomeDuplicate},
	"conflict":    {proxy.OutcomeConflict},
	"not_success": {proxy.OutcomeNotSuccess},
	"released":    {proxy.OutcomeReleased},
	"object_busy": {proxy.OutcomeObjectBusy},
	"refused":     {proxy.OutcomeRejectedSignature, proxy.OutcomeMissingKey, proxy.OutcomeTooLarge, proxy.OutcomeBadRequest},
}

// overviewTraffic runs a proxy on SQLite, sends it a day's worth of mixed
// deliveries and serves the admin handler wired as serve wires it (the
// proxy's registry, its unretried list).
func overviewTraffic(t *testing.T, store dedupe.Store) (*httptest.Server, *proxytest.Instance) {
	t.Helper()
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case strings.Contains(string(body), "fail"):
			w.WriteHeader(http.StatusInternalServerError)
		case strings.Contains(string(body), "slow"):
			time.Sleep(120 * time.Millisecond)
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
    retry_window: 1ms
  - name: crm
    match: { path: /hooks/crm }
    key: [ { body: id } ]
`)
	post := func(path, body string) { proxytest.Post(t, px.URL+path, body) }
	for i := range 5 {
		post("/hooks/shop", `{"id":"evt-`+strconv.Itoa(i)+`"}`)
	}
	post("/hooks/shop", `{"id":"evt-0"}`)          // duplicate
	post("/hooks/shop", `{"id":"evt-0"}`)          // duplicate
	post("/hooks/shop", `{"id":"evt-1","x":1}`)    // conflict
	post("/hooks/shop", `{"id":"fail-1"}`)         // not a success: released
	post("/hooks/shop", `{"id":"fail-2"}`)         // not a success: released
	post("/hooks/shop", `{"no":"key"}`)            // refused: no key
	post("/hooks/crm", `{"id":"c-1","slow":true}`) // processed, 120 ms at the site
	post("/hooks/crm", `{"id":"c-1","slow":true}`) // duplicate
	post("/hooks/crm", `{"id":"c-2"}`)             // processed
	// The replays' hits reach the store in the background.
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec, err := store.Get(context.Background(), "shop", "evt-0")
		crm, err2 := store.Get(context.Background(), "crm", "c-1")
		if err == nil && err2 == nil && rec.Hits == 2 && crm.Hits == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // past shop's retry window: fail-1 and fail-2 are unretried
	h, err := admin.New(admin.Options{Store: store, Gatherer: px.Registry, Token: testToken, Logger: slog.New(slog.DiscardHandler),
		Unretried: func(ctx context.Context, sender string) ([]dedupe.Record, error) {
			return px.Proxy.Unretried(ctx, sender, time.Now())
		}})
	if err != nil {
		t.Fatal(err)
	}
	adm := httptest.NewServer(h)
	t.Cleanup(adm.Close)
	return adm, px
}

// fromMetrics is what the page must show since start: the proxy's own
// counters, grouped as the page groups them.
func fromMetrics(t *testing.T, px *proxytest.Instance, sender string) map[string]int {
	out := map[string]int{}
	for cat, outcomes := range overviewCategories {
		for _, o := range outcomes {
			out[cat] += int(proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", sender, "outcome", o))
		}
	}
	return out
}

var (
	sectionRE = regexp.MustCompile(`(?s)<section class="sender" data-sender="([^"]*)">(.*?)</section>`)
	rowRE     = regexp.MustCompile(`<tr data-outcome="([a-z_]+)"><td>[^<]*</td><td class="num window">(.*?)</td><td class="num started">(\d+)</td>`)
)

// TestOverviewPage: the page's since-start counts are the metrics', its
// window counts the store's; refusals are metrics only; the page has no
// script and keeps the CSP.
func TestOverviewPage(t *testing.T) {
	store := openStore(t)
	adm, px := overviewTraffic(t, store)
	status, hdr, body := get(t, adm.URL+"/ui/overview", nil, testToken)
	if status != 200 {
		t.Fatalf("overview: %d\n%s", status, body)
	}
	if csp := hdr.Get("Content-Security-Policy"); csp != "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'" {
		t.Errorf("CSP changed: %q", csp)
	}
	if strings.Contains(body, "<script") || strings.Contains(body, " on") && regexp.MustCompile(`\son[a-z]+=`).MatchString(body) {
		t.Error("the page carries a script")
	}
	if !strings.Contains(body, `<a href="/ui/overview">Overview</a>`) {
		t.Error("no Overview link in the navigation")
	}
	secs := map[string]string{}
	for _, m := range sectionRE.FindAllStringSubmatch(body, -1) {
		secs[m[1]] = m[2]
	}
	wantWindow := map[string]map[string]string{
		"shop": {"processed": "5", "duplicate": "2", "conflict": "1", "refused": "–"},
		"crm":  {"processed": "2", "duplicate": "1", "conflict": "0", "refused": "–"},
	}
	for _, sender := range []string{"shop", "crm"} {
		sec, ok := secs[sender]
		if !ok {
			t.Fatalf("no section for %s:\n%s", sender, body)
		}
		metrics := fromMetrics(t, px, sender)
		rows := rowRE.FindAllStringSubmatch(sec, -1)
		if len(rows) != 8 {
			t.Fatalf("%s: %d rows, want 8:\n%s", sender, len(rows), sec)
		}
		for _, r := range rows {
			cat, win, started := r[1], stripTags(r[2]), r[3]
			if want, ok := metrics[cat]; ok && started != strconv.Itoa(want) {
				t.Errorf("%s %s since start: page %s, metrics %d", sender, cat, started, want)
			}
			if want, ok := wantWindow[sender][cat]; ok && win != want {
				t.Errorf("%s %s in 24 h: page %q, want %q", sender, cat, win, want)
			}
		}
		if metrics["processed"] == 0 || (sender == "shop" && (metrics["refused"] != 1 || metrics["not_success"]+metrics["released"] != 2)) {
			t.Errorf("%s: the traffic did not come out as planned: %v", sender, metrics)
		}
	}
	if !strings.Contains(secs["shop"], `unretried now: <b class="unretried-count">2</b>`) {
		t.Errorf("shop's unretried count is not 2:\n%s", secs["shop"])
	}
	if !regexp.MustCompile(`class="latency-window">1 at the site · mean 12\d\.\dms`).MatchString(secs["crm"]) &&
		!regexp.MustCompile(`class="latency-window">2 at the site`).MatchString(secs["crm"]) {
		t.Errorf("crm's latency:\n%s", secs["crm"])
	}

	t.Run("all kept records", func(t *testing.T) {
		status, _, body := get(t, adm.URL+"/ui/overview?window=all", nil, testToken)
		if status != 200 || !strings.Contains(body, "<b>all kept records</b>") {
			t.Fatalf("window=all: %d\n%s", status, body)
		}
	})
	t.Run("a store without a summary", func(t *testing.T) {
		h, err := admin.New(admin.Options{Store: noSummaryStore{store}, Gatherer: px.Registry})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		status, _, body := get(t, srv.URL+"/ui/overview", nil, "")
		if status != 200 || !strings.Contains(body, `id="no-summary"`) || !strings.Contains(body, `data-sender="shop"`) {
			t.Fatalf("without a summary: %d\n%s", status, body)
		}
	})
}

// noSummaryStore hides the store's Summarizer, as Redis has none.
type noSummaryStore struct{ dedupe.Store }

var tagRE = regexp.MustCompile(`<[^>]*>`)

func stripTags(s string) string { return strings.TrimSpace(tagRE.ReplaceAllString(s, "")) }

// TestOverviewInChromium opens the overview in headless Chromium (through
// playwright-core): the counts it shows are the metrics' and the store's,
// the page logs no CSP violation, and a screenshot is taken and checked by
// what the page says, not by its pixels.
func TestOverviewInChromium(t *testing.T) {
	bin := chromium(t)
	dir := playwright(t)
	store := openStore(t)
	adm, px := overviewTraffic(t, store)
	shot := filepath.Join(os.TempDir(), "hookonce-ui-screenshots", "overview.png")
	_ = os.MkdirAll(filepath.Dir(shot), 0o755)
	_ = os.Remove(shot)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "overview.js"), adm.URL, testToken, bin, shot)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("browser: %v\n%s", err, out)
	}
	var got struct {
		Senders map[string]map[string]struct{ Window, Started string }
		Bars    map[string]int
		Console []string
		Text    string
	}
	if err := json.Unmarshal(out[strings.LastIndexByte(strings.TrimSpace(string(out)), '\n')+1:], &got); err != nil {
		t.Fatalf("browser said %q: %v", out, err)
	}
	for _, msg := range got.Console {
		t.Errorf("console: %s", msg)
	}
	for _, sender := range []string{"shop", "crm"} {
		rows := got.Senders[sender]
		if len(rows) != 8 {
			t.Fatalf("%s: %d rows in the browser: %+v", sender, len(rows), got.Senders)
		}
		for cat, want := range fromMetrics(t, px, sender) {
			if rows[cat].Started != strconv.Itoa(want) {
				t.Errorf("%s %s: Chromium shows %q since start, the metrics say %d", sender, cat, rows[cat].Started, want)
			}
		}
		if got.Bars[sender] != 16 {
			t.Errorf("%s: %d bars drawn, want 16 (8 outcomes × 2)", sender, got.Bars[sender])
		}
	}
	if got.Senders["shop"]["processed"].Window != "5" || got.Senders["shop"]["duplicate"].Window != "2" {
		t.Errorf("shop's 24 h column: %+v", got.Senders["shop"])
	}
	// The screenshot, by content: the file is a PNG of the page, and the
	// text the browser rendered in it carries the counts.
	b, err := os.ReadFile(shot)
	if err != nil || len(b) < 5000 || string(b[1:4]) != "PNG" {
		t.Fatalf("screenshot %s: %d bytes, %v", shot, len(b), err)
	}
	for _, want := range []string{"Overview", "shop", "crm", "duplicate replayed", "unretried now: 2", "counted in metrics only"} {
		if !strings.Contains(got.Text, want) {
			t.Errorf("the rendered page does not say %q:\n%s", want, got.Text)
		}
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(b))
}
