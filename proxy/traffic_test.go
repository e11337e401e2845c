package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

const trafficYAML = `
senders:
  - name: gh
    preset: github
    mode: shadow
    match: { path: /hooks/github }
    signature: { secret_env: TR_SECRET }
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
`

// waitTraffic reads the store's counters until want holds or 5 s pass.
func waitTraffic(t *testing.T, s dedupe.Store, want func(map[string]dedupe.TrafficCount) bool) map[string]dedupe.TrafficCount {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		cs, err := s.(dedupe.TrafficReader).Traffic(context.Background(), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]dedupe.TrafficCount{}
		for _, c := range cs {
			m[c.Sender+"|"+c.Outcome] = c
		}
		if want(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("traffic counters: %+v", cs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Each decision is counted per sender, path, outcome and status, a
// refusal that writes no record too; a keyless delivery with its shape,
// never its values.
func TestTrafficCounted(t *testing.T) {
	t.Setenv("TR_SECRET", "s3cret")
	store := newStore(t)
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, trafficYAML)
	forged := proxytest.Post(t, px.Server.URL+"/hooks/github", `{"id":"f1","zen":"hi"}`,
		"X-GitHub-Delivery", "d-1", "X-GitHub-Event", "ping", "X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
	if forged.Status != 200 || site.Executions("f1") != 1 {
		t.Fatalf("shadow forged delivery: %d, site ran it %d times", forged.Status, site.Executions("f1"))
	}
	for range 2 {
		proxytest.Post(t, px.Server.URL+"/hooks/shop", `{"id":"o1","amount":"4200"}`)
	}
	if r := proxytest.Post(t, px.Server.URL+"/hooks/shop", `{"order":"o2","email":"buyer@example.com"}`); r.Status != 400 {
		t.Fatalf("keyless delivery: %d, want 400", r.Status)
	}
	m := waitTraffic(t, store, func(m map[string]dedupe.TrafficCount) bool { return len(m) >= 4 })
	for k, want := range map[string][2]int64{
		"gh|would_rejected_signature": {1, 0}, "shop|processed": {1, 200}, "shop|duplicate": {1, 200}, "shop|missing_key": {1, 400},
	} {
		c, ok := m[k]
		if !ok || c.N != want[0] || int64(c.Status) != want[1] {
			t.Errorf("counter %s = %+v, want n %d status %d", k, c, want[0], want[1])
		}
	}
	rules, _, shape := dedupe.ParseTrafficDetail(m["shop|missing_key"].Detail)
	if shape != "POST; json: email,order" {
		t.Errorf("keyless shape %q, want its method and field names", shape)
	}
	// Each sender's counter carries the tag of its rules; a good delivery
	// and a bad signature their source network.
	if want := mustParse(t, trafficYAML).Senders[1].RulesTag(); rules != want || len(rules) != 8 {
		t.Errorf("keyless counter's rules tag %q, want %q", rules, want)
	}
	for _, k := range []string{"shop|processed", "gh|would_rejected_signature"} {
		if _, from, _ := dedupe.ParseTrafficDetail(m[k].Detail); from != "127.0.0.0/24" {
			t.Errorf("counter %s comes from %q, want 127.0.0.0/24", k, from)
		}
	}
	if strings.Contains(shape, "buyer@") || strings.Contains(shape, "o2") {
		t.Errorf("the shape %q holds a value", shape)
	}
	if p := m["shop|processed"].Path; p != "/hooks/shop" {
		t.Errorf("path %q", p)
	}
}

// failingTraffic is a store whose counters cannot be written.
type failingTraffic struct{ dedupe.Store }

func (failingTraffic) AddTraffic(context.Context, []dedupe.TrafficCount) error {
	return errors.New("disk full")
}

// Counters never slow or fail a delivery: with every write of them
// failing, deliveries are answered and run once, and the loss is logged.
func TestTrafficFailureLosesNoDelivery(t *testing.T) {
	t.Setenv("TR_SECRET", "s3cret")
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, failingTraffic{newStore(t)}, site.URL, trafficYAML)
	for range 3 {
		if r := proxytest.Post(t, px.Server.URL+"/hooks/shop", `{"id":"o1"}`); r.Status != 200 {
			t.Fatalf("delivery with failing counters: %d", r.Status)
		}
	}
	if n := site.Executions("o1"); n != 1 {
		t.Fatalf("the site ran o1 %d times, want once", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(px.Logs.String(), "readiness counters not stored") {
		if time.Now().After(deadline) {
			t.Fatalf("no log line for the lost counters:\n%s", px.Logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A keyless delivery's shape: names only, bounded, and a large body is
// not read for them.
func TestTrafficShapes(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewSite(t, nil)
	t.Setenv("TR_SECRET", "s3cret")
	px := proxytest.Start(t, store, site.URL, trafficYAML)
	many := make([]string, 30)
	for i := range many {
		many[i] = fmt.Sprintf(`"f%02d\n":%d`, i, i)
	}
	proxytest.Post(t, px.Server.URL+"/hooks/shop?x=1&card=4111", "{"+strings.Join(many, ",")+"}")
	proxytest.Post(t, px.Server.URL+"/hooks/shop", `{"pad":"`+strings.Repeat("x", 70<<10)+`"}`)
	var shapes []string
	for deadline := time.Now().Add(5 * time.Second); len(shapes) < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		cs, err := store.(dedupe.TrafficReader).Traffic(context.Background(), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		shapes = shapes[:0]
		for _, c := range cs {
			if c.Outcome == "missing_key" {
				_, _, shape := dedupe.ParseTrafficDetail(c.Detail)
				shapes = append(shapes, shape)
			}
		}
	}
	want := []string{"POST; body: application/json (large)",
		"POST; query: card,x; json: f00_,f01_,f02_,f03_,f04_,f05_,f06_,f07_,f08_,f09_,f10_,f11_,f12_,f13_,f14_,f15_,f16_,f17_,f18_,f19_,f20_,f21_,f22_,f23_,…"}
	if strings.Join(shapes, "\n") != strings.Join(want, "\n") {
		t.Errorf("shapes:\n%s\nwant:\n%s", strings.Join(shapes, "\n"), strings.Join(want, "\n"))
	}
}

// An unsigned flood of made-up field names on made-up paths under a
// sender's prefix: every request is counted, under the route's path as
// the config writes it (never the path the client chose), with at most
// dedupe.MaxTrafficShapes shapes and the rest in one "other shapes"
// counter; the WARN lines of requests no sender took are throttled to
// about one a second; a genuine delivery amid them is counted and runs
// once.
func TestTrafficUnmatchedFlood(t *testing.T) {
	const cfg = `
senders:
  - name: pay
    match: { path: /pay/*, when: [ { body: kind, equals: pay } ] }
    key: [ { body: id } ]
`
	store := newStore(t)
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, cfg)
	const flood = 3 * dedupe.MaxTrafficShapes
	start := time.Now()
	for i := range flood {
		r := proxytest.Post(t, fmt.Sprintf("%s/pay/x%d.php", px.Server.URL, i), fmt.Sprintf(`{"junk%d":1}`, i))
		if r.Status != 200 {
			t.Fatalf("unmatched request %d: %d, want the site's 200 (forwarded)", i, r.Status)
		}
		if i == flood/2 {
			if r := proxytest.Post(t, px.Server.URL+"/pay/result.php", `{"id":"o1","kind":"pay"}`); r.Status != 200 {
				t.Fatalf("genuine delivery amid the flood: %d", r.Status)
			}
		}
	}
	took := time.Since(start)
	if n := site.Executions("o1"); n != 1 {
		t.Fatalf("the site ran o1 %d times, want once", n)
	}
	if n := site.Total(); n != flood+1 {
		t.Fatalf("the site got %d requests, want %d", n, flood+1)
	}
	var cs []dedupe.TrafficCount
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		cs, err = store.(dedupe.TrafficReader).Traffic(context.Background(), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, c := range cs {
			n += c.N
		}
		if n == flood+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters sum to %d deliveries, want %d: %+v", n, flood+1, cs)
		}
	}
	var rows int
	var other int64
	processed := false
	for _, c := range cs {
		if c.Path != "/pay/*" {
			t.Errorf("a counter on the client's path: %+v", c)
		}
		switch {
		case c.Outcome == "unmatched":
			rows++
			if c.Detail == dedupe.TrafficOtherDetail {
				other = c.N
			}
		case c.Sender == "pay" && c.Outcome == "processed":
			processed = c.N == 1
		}
	}
	if rows > dedupe.MaxTrafficShapes+1 || other != flood-dedupe.MaxTrafficShapes {
		t.Errorf("%d unmatched counters, %d in %q; want at most %d, %d", rows, other, dedupe.TrafficOtherDetail,
			dedupe.MaxTrafficShapes+1, flood-dedupe.MaxTrafficShapes)
	}
	if !processed {
		t.Errorf("the genuine delivery is not counted: %+v", cs)
	}
	// Ten lines at once, then one a second (proxy.unmatchedLine).
	lines := strings.Count(px.Logs.String(), `"outcome":"unmatched"`)
	if most := 10 + int(took/time.Second) + 1; lines == 0 || lines > most {
		t.Errorf("%d log lines for %d unmatched requests in %v, want at most %d", lines, flood, took, most)
	}
	if !strings.Contains(px.Logs.String(), `"unmatched_since_last_line":1`) {
		t.Errorf("the first unmatched line does not say how many it stands for:\n%.2000s", px.Logs.String())
	}
}

func mustParse(t *testing.T, yaml string) *contract.Contract {
	t.Helper()
	c, err := contract.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Forged deliveries (a bad signature, no key) are what anyone can send
// without a secret: each is counted, none reaches the site, and their log
// lines have the same budget per path and outcome as unmatched ones.
func TestForgedFloodLogsBounded(t *testing.T) {
	const cfg = `
senders:
  - name: pay
    match: { path: /pay.php }
    key: [ { body: id } ]
    signature: { scheme: hmac-sha256, header: X-Sig, secret_env: FORGED_FLOOD_SECRET }
`
	t.Setenv("FORGED_FLOOD_SECRET", "s3cret")
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, newStore(t), site.URL, cfg)
	const flood = 60
	start := time.Now()
	for i := range flood {
		if r := proxytest.Post(t, px.Server.URL+"/pay.php", fmt.Sprintf(`{"id":"f%d"}`, i)); r.Status != 401 {
			t.Fatalf("forged delivery %d: %d, want 401", i, r.Status)
		}
	}
	took := time.Since(start)
	if n := site.Total(); n != 0 {
		t.Fatalf("the site ran %d forged deliveries, want 0", n)
	}
	if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "pay", "outcome", "rejected_signature"); n != flood {
		t.Fatalf("counted %v refusals, want %d", n, flood)
	}
	lines := strings.Count(px.Logs.String(), `"outcome":"rejected_signature"`)
	if most := 10 + int(took/time.Second) + 1; lines == 0 || lines > most {
		t.Errorf("%d log lines for %d forged requests in %v, want at most %d", lines, flood, took, most)
	}
	if !strings.Contains(px.Logs.String(), `"refused_since_last_line":1`) {
		t.Errorf("the first refusal line does not say how many it stands for:\n%.2000s", px.Logs.String())
	}
}
