package admin_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/readiness"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

const readinessYAML = `
senders:
  - name: shop
    mode: shadow
    match: { path: /hooks/shop }
    key: [ { body: id } ]
  - name: stripe
    mode: shadow
    match: { path: /hooks/stripe }
    key: [ { body: id } ]
    hash: json
    store_request_body: true
`

// shadowTraffic sends shop 22 events and 3 exact repeats (ready), and
// stripe 3 events each sent again with pending_webhooks counted down
// (not ready), through a real proxy in shadow mode; it checks that the
// site ran every delivery, and returns the report once the counters are
// in the store.
func shadowTraffic(t *testing.T, store dedupe.Store) func(ctx context.Context, since time.Time) (readiness.Report, error) {
	site := proxytest.NewSite(t, nil)
	srv := proxytest.StartProxy(t, store, site.URL, readinessYAML)
	for i := range 22 {
		proxytest.Post(t, srv.URL+"/hooks/shop", fmt.Sprintf(`{"id":"ord-%d"}`, i))
		if i%8 == 0 {
			proxytest.Post(t, srv.URL+"/hooks/shop", fmt.Sprintf(`{"id":"ord-%d"}`, i))
		}
	}
	for i := range 3 {
		for pending := 3; pending > 1; pending-- {
			proxytest.Post(t, srv.URL+"/hooks/stripe", fmt.Sprintf(`{"id":"evt_%d","pending_webhooks":%d}`, i, pending))
		}
	}
	for i := range 22 {
		want := 1
		if i%8 == 0 {
			want = 2
		}
		if n := site.Executions(fmt.Sprintf("ord-%d", i)); n != want {
			t.Fatalf("shadow mode: the site ran ord-%d %d times, want %d", i, n, want)
		}
	}
	senders := []readiness.Sender{
		{Name: "shop", Path: "/hooks/shop", Mode: "shadow", Keys: []string{"body:id"}, Timeout: 30 * time.Second, TimeoutFrom: "upstream_timeout"},
		{Name: "stripe", Path: "/hooks/stripe", Mode: "shadow", HashJSON: true, StoreRequestBody: true, Keys: []string{"body:id"}},
	}
	build := func(ctx context.Context, since time.Time) (readiness.Report, error) {
		return readiness.Build(ctx, store, senders, readiness.Options{DistinctKeys: true, Since: since})
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		rep, err := build(context.Background(), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		n := int64(0)
		for _, s := range rep.Senders {
			n += s.Deliveries
		}
		if n == 22+3+6 {
			return build
		}
		if time.Now().After(deadline) {
			t.Fatalf("the report counts %d deliveries, 31 were sent", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The readiness page in headless Chromium: each sender's verdict, the
// fix, and the evidence one click away (the event whose field changed and
// the sender's conflicts, which list the field).
func TestReadinessPageInChromium(t *testing.T) {
	bin := chromium(t)
	store := openStore(t)
	build := shadowTraffic(t, store)
	h, err := admin.New(admin.Options{Store: store, Token: testToken, Logger: slog.New(slog.DiscardHandler), Readiness: build})
	if err != nil {
		t.Fatal(err)
	}
	adm := httptest.NewServer(h)
	t.Cleanup(adm.Close)
	login := func(next string) string {
		return adm.URL + "/ui/login?" + url.Values{"token": {testToken}, "next": {next}}.Encode()
	}
	dom := browse(t, bin, t.TempDir(), login("/ui/readiness"), "--dump-dom")
	for _, want := range []string{
		`data-sender="shop" data-verdict="ready"`,
		`data-sender="stripe" data-verdict="not ready"`,
		"<code>pending_webhooks</code> changed in 3 of 3 repeats",
		"add <code>pending_webhooks</code> to <code>ignore</code>",
		`href="/ui/events/stripe/evt_2"`,
		`href="/ui/conflicts?sender=stripe"`,
		`<a href="/ui/readiness">Readiness</a>`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the readiness page lacks %s", want)
		}
	}
	// The report marks names as `code spans` for the terminal; the page
	// renders them, never a literal backtick.
	if strings.Contains(dom, "`") {
		t.Errorf("the readiness page shows a literal backtick")
	}
	if t.Failed() {
		t.Fatalf("DOM:\n%s", dom)
	}
	// One click: the sender's conflicts name the field.
	conflicts := browse(t, bin, t.TempDir(), login("/ui/conflicts?sender=stripe"), "--dump-dom")
	if n := strings.Count(conflicts, `<tr class="conflict">`); n != 3 || !strings.Contains(conflicts, "pending_webhooks") {
		t.Fatalf("the evidence link shows %d conflicts:\n%s", n, conflicts)
	}
	screenshot(t, bin, login("/ui/readiness"), "readiness")
}

// Without a report function (an admin listener that does not know the
// senders) the page and the API say so.
func TestReadinessNotAvailable(t *testing.T) {
	h, err := admin.New(admin.Options{Store: openStore(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/ui/readiness", "/v1/readiness"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1"+p, nil))
		if rec.Code != 501 {
			t.Errorf("GET %s without a report: %d, want 501", p, rec.Code)
		}
	}
}
