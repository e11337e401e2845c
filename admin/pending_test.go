package admin_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe/view"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

const durableOverviewConfig = `
senders:
  - name: cdek
    match: { path: /hooks/cdek }
    key: [ { body: id } ]
    ack: durable
    ack_answer: { status: 200, body: "received" }
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
`

var owedRE = regexp.MustCompile(`owed to the site: <b class="owed-count">(\d+)</b>`)

// The deliveries hookonce owes the site are shown where an operator looks:
// the overview (per durable sender, from the pending gauges), the events
// API and page (status=pending, and each record's pending object), and an
// event's page. Once the site is back they are delivered, once each, and
// the same places show nothing owed.
func TestOwedDeliveriesShown(t *testing.T) {
	store := openStore(t)
	site := proxytest.NewStoppableSite(t, nil)
	px := proxytest.StartWith(t, store, site.URL, durableOverviewConfig, func(o *proxy.Options) {
		o.DurableBackoff = []time.Duration{100 * time.Millisecond}
		o.DurablePoll = 50 * time.Millisecond
	})
	h, err := admin.New(admin.Options{Store: store, Gatherer: px.Registry, Token: testToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	adm := httptest.NewServer(h)
	t.Cleanup(adm.Close)

	site.Stop()
	for i := range 2 {
		if got := proxytest.Post(t, px.URL+"/hooks/cdek", fmt.Sprintf(`{"id":"e%d"}`, i)); got.Status != 200 {
			t.Fatalf("e%d: %d, want hookonce's 200", i, got.Status)
		}
	}
	if n := site.Total(); n != 0 {
		t.Fatalf("site ran %d while down", n)
	}
	overview := func() string {
		r := do(t, "GET", adm.URL+"/ui/overview", testToken)
		if r.status != 200 {
			t.Fatalf("overview: %d", r.status)
		}
		return string(r.body)
	}
	// The owed count moves as each is accepted; the oldest's age comes
	// with the store's recount (every 5 polls). The page shows what the
	// gauges say, the link to the owed ones with the age.
	deadline := time.Now().Add(8 * time.Second)
	for proxytest.Metric(t, px.Registry, "hookonce_pending_deliveries", "sender", "cdek") != 2 ||
		proxytest.Metric(t, px.Registry, "hookonce_oldest_pending_seconds", "sender", "cdek") <= 0 {
		if time.Now().After(deadline) {
			t.Fatal("the pending gauges never counted 2 owed, the oldest aged")
		}
		time.Sleep(50 * time.Millisecond)
	}
	page := overview()
	sections := map[string]string{}
	for _, m := range sectionRE.FindAllStringSubmatch(page, -1) {
		sections[m[1]] = m[2]
	}
	if m := owedRE.FindStringSubmatch(sections["cdek"]); m == nil || m[1] != "2" || !strings.Contains(sections["cdek"], `status=pending`) {
		t.Fatalf("overview's cdek section does not show 2 owed:\n%s", sections["cdek"])
	}
	if strings.Contains(sections["shop"], "owed to the site") {
		t.Fatal("a sender without ack: durable is shown owing deliveries")
	}

	r := do(t, "GET", adm.URL+"/v1/events?status=pending", testToken)
	var recs []view.RecordJSON
	if r.status != 200 || json.Unmarshal(r.body, &recs) != nil || len(recs) != 2 || recs[0].Pending == nil || recs[1].Pending == nil {
		t.Fatalf("events?status=pending: %d %s", r.status, r.body)
	}
	r = do(t, "GET", adm.URL+"/v1/events/cdek/e0", testToken)
	var one view.RecordJSON
	if r.status != 200 || json.Unmarshal(r.body, &one) != nil || one.Pending == nil || one.Pending.Until.Sub(one.Pending.Since) < 71*time.Hour {
		t.Fatalf("events/cdek/e0: %d %s", r.status, r.body)
	}
	r = do(t, "GET", adm.URL+"/ui/events?status=pending", testToken)
	if body := string(r.body); r.status != 200 || strings.Count(body, `<span class="owed">owed to the site</span>`) != 2 ||
		!strings.Contains(body, `<option value="pending" selected>`) {
		t.Fatalf("events page, status=pending: %d\n%s", r.status, body)
	}
	r = do(t, "GET", adm.URL+"/ui/events/cdek/e1", testToken)
	if body := string(r.body); r.status != 200 || !strings.Contains(body, `id="owed"`) || strings.Contains(body, `id="redeliver"`) {
		t.Fatalf("event page of an owed delivery: %d\n%s", r.status, body)
	}

	site.Start()
	deadline = time.Now().Add(10 * time.Second)
	for proxytest.Metric(t, px.Registry, "hookonce_pending_deliveries", "sender", "cdek") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the owed deliveries were not delivered: the site ran %d", site.Total())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, k := range []string{"e0", "e1"} {
		if n := site.Executions(k); n != 1 {
			t.Fatalf("%s ran %d times at the site", k, n)
		}
	}
	if m := owedRE.FindStringSubmatch(overview()); m == nil || m[1] != "0" {
		t.Fatal("overview still shows deliveries owed")
	}
	r = do(t, "GET", adm.URL+"/v1/events?status=pending", testToken)
	if strings.TrimSpace(string(r.body)) != "[]" {
		t.Fatalf("events?status=pending after delivery: %s", r.body)
	}
}
