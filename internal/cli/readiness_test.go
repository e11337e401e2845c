package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe/readiness"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// The readiness report end to end: a recorded mix of a shop's traffic
// replayed through serve in shadow mode, a counting site behind it; the
// report's verdict and suggested change for each sender; then one sender
// switched to enforce once ready.

// newShopSite is a counting site (proxytest.Site) that counts every
// request under its path and body (its forms carry no id it reads) and
// answers like the shop: the Bitrix script "OK<InvId>", the legacy script
// "done" (its success marker missing), the JSON hooks 200.
func newShopSite(t *testing.T) *proxytest.Site {
	return proxytest.NewSiteKeyed(t, func(r *http.Request, body []byte) string { return runKey(r.URL.Path, string(body)) },
		func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			form, _ := url.ParseQuery(string(body))
			switch r.URL.Path {
			case "/bitrix/tools/sale_ps_result.php":
				if id := form.Get("InvId"); id != "" {
					fmt.Fprintf(w, "OK%s", id)
					return
				}
				fmt.Fprint(w, "OK")
			case "/legacy/notify.php":
				fmt.Fprint(w, "done")
			default:
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"ok":true}`)
			}
		})
}

// runKey is what newShopSite counts a request under.
func runKey(path, body string) string { return path + " " + body }

// delivery is one recorded delivery: where, what, and as which content.
type delivery struct {
	path, ctype, body string
}

func form(v url.Values) string { return v.Encode() }

// recordedMix is the shop's traffic: per sender a few dozen notifications
// and their senders' retries.
//   - robokassa: 24 payments, 4 of them retried exactly (ready);
//   - stripe: 20 events, 6 of them sent again with pending_webhooks
//     counting down (a volatile field: ignore it);
//   - shop: 22 orders, 4 exact retries, and order 7 notified twice, paid
//     and then refunded, differing in refundId (a key that collides
//     for two real notifications: add it to the key);
//   - legacy: 21 notifications, 3 retried; the site answers "done" without
//     its success marker "OK<id>";
//   - an unknown provider on the Bitrix script (a T-Bank-like form no
//     sender takes), 5 deliveries.
func recordedMix(offset int) []delivery {
	var out []delivery
	rk := func(i int) delivery {
		return delivery{"/bitrix/tools/sale_ps_result.php", "application/x-www-form-urlencoded",
			form(url.Values{"InvId": {fmt.Sprint(offset + i)}, "OutSum": {"100.00"}, "SHP_HANDLER": {"ROBOXCHANGE"}, "SignatureValue": {"abc"}})}
	}
	for i := range 24 {
		out = append(out, rk(i))
		if i%6 == 0 {
			out = append(out, rk(i))
		}
	}
	st := func(i, pending int) delivery {
		return delivery{"/webhooks/stripe", "application/json",
			fmt.Sprintf(`{"id":"evt_%d","object":"event","type":"payment_intent.succeeded","data":{"object":{"amount":%d}},"pending_webhooks":%d}`, offset+i, 1000+i, pending)}
	}
	for i := range 20 {
		out = append(out, st(i, 3))
		if i%4 == 0 {
			out = append(out, st(i, 2), st(i, 1))
		}
	}
	shop := func(i int, status string, refunded int) delivery {
		return delivery{"/webhooks/shop", "application/json",
			fmt.Sprintf(`{"orderId":"%d","status":"%s","refundId":%d}`, offset+i, status, refunded)}
	}
	for i := range 22 {
		out = append(out, shop(i, "paid", 0))
		if i%6 == 1 {
			out = append(out, shop(i, "paid", 0))
		}
	}
	out = append(out, shop(7, "paid", 500))
	lg := func(i int) delivery {
		return delivery{"/legacy/notify.php", "application/x-www-form-urlencoded", form(url.Values{"id": {fmt.Sprint(offset + i)}, "sum": {"5"}})}
	}
	for i := range 21 {
		out = append(out, lg(i))
		if i%10 == 0 {
			out = append(out, lg(i))
		}
	}
	for i := range 5 {
		out = append(out, delivery{"/bitrix/tools/sale_ps_result.php", "application/x-www-form-urlencoded",
			form(url.Values{"TerminalKey": {"shop"}, "PaymentId": {fmt.Sprint(offset + i)}, "Status": {"CONFIRMED"}, "Token": {"t"}})})
	}
	return out
}

const readinessConfig = `
senders:
  - name: robokassa
    mode: %s
    match:
      path: /bitrix/tools/sale_ps_result.php
      when: [ { request: SHP_HANDLER, equals: ROBOXCHANGE } ]
    key: [ { request: InvId } ]
    success: { body: "OK{request.InvId}" }
  - name: stripe
    mode: shadow
    match: { path: /webhooks/stripe }
    key: [ { body: id } ]
    hash: json
    store_request_body: true
  - name: shop
    mode: shadow
    match: { path: /webhooks/shop }
    key: [ { body: orderId } ]
    hash: json
    store_request_body: true
  - name: legacy
    mode: shadow
    match: { path: /legacy/notify.php }
    key: [ { form: id } ]
    success: { body: "OK{form.id}" }
paths:
  /bitrix/tools/sale_ps_result.php: { unmatched: pass }
`

func send(t *testing.T, base string, mix []delivery) {
	t.Helper()
	for _, d := range mix {
		resp, err := http.Post(base+d.path, d.ctype, strings.NewReader(d.body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// readinessJSON runs hookonce readiness --json and decodes its report.
func readinessJSON(t *testing.T, args ...string) (readiness.Report, int) {
	t.Helper()
	out, errOut, code := hookonce(t, append([]string{"readiness", "--json"}, args...)...)
	var rep readiness.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("readiness --json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	return rep, code
}

func senderReport(t *testing.T, rep readiness.Report, name string) readiness.SenderReport {
	t.Helper()
	for _, s := range rep.Senders {
		if s.Sender == name {
			return s
		}
	}
	t.Fatalf("no sender %s in the report: %+v", name, rep.Senders)
	return readiness.SenderReport{}
}

func findingWith(fs []readiness.Finding, parts ...string) bool {
	for _, f := range fs {
		all := true
		for _, p := range parts {
			if !strings.Contains(f.What+" → "+f.Fix, p) {
				all = false
			}
		}
		if all {
			return true
		}
	}
	return false
}

func TestReadinessFromShadowTraffic(t *testing.T) {
	dir := t.TempDir()
	site := newShopSite(t)
	cfgFile := filepath.Join(dir, "hookonce.yaml")
	writeFile(t, cfgFile, fmt.Sprintf(readinessConfig, "shadow"))
	store := "sqlite:" + filepath.Join(dir, "h.db")
	cfg := DefaultConfig()
	cfg.ConfigPath, cfg.Upstream, cfg.Store = cfgFile, site.URL, store
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	m := NewMain(cfg, "test", io.Discard)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr().String()

	mix := recordedMix(0)
	send(t, base, mix)
	// The site saw every delivery exactly as without hookonce.
	sent := map[string]int{}
	for _, d := range mix {
		sent[d.path+" "+d.body]++
	}
	for k, n := range sent {
		path, body, _ := strings.Cut(k, " ")
		if got := site.Executions(runKey(path, body)); got != n {
			t.Errorf("shadow mode: the site ran %s %s %d times, sent %d", path, body, got, n)
		}
	}

	// The counters reach the store within a flush (1 s).
	var rep readiness.Report
	var code int
	deadline := time.Now().Add(10 * time.Second)
	for {
		rep, code = readinessJSON(t, "--store", store, "--config", cfgFile)
		total := int64(0)
		for _, s := range rep.Senders {
			total += s.Deliveries
		}
		for _, p := range rep.Paths {
			total += p.Deliveries
		}
		if total == int64(len(mix)) || time.Now().After(deadline) {
			if total != int64(len(mix)) {
				t.Fatalf("the report counts %d deliveries, %d were sent", total, len(mix))
			}
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code != exitNoGo || rep.GoLive {
		t.Fatalf("readiness exit %d, ready %v; want %d (some sender not ready)", code, rep.GoLive, exitNoGo)
	}

	rk := senderReport(t, rep, "robokassa")
	if rk.Verdict != readiness.GoLive || rk.ExactRepeats != 4 || rk.Deliveries != 28 || rk.Changed != 0 || rk.Answers["200"] != 24 {
		t.Errorf("robokassa: %s (%s), repeats %d, deliveries %d, changed %d, answers %v; want ready, 4, 28, 0, 200×24",
			rk.Verdict, rk.Reason, rk.ExactRepeats, rk.Deliveries, rk.Changed, rk.Answers)
	}
	if !rk.DistinctKeysExact || rk.DistinctKeys != 24 {
		t.Errorf("robokassa: distinct keys %d (exact %v), want 24", rk.DistinctKeys, rk.DistinctKeysExact)
	}
	if rk.Unsigned != 28 {
		t.Errorf("robokassa: unsigned %d, want 28 (no signature configured)", rk.Unsigned)
	}

	st := senderReport(t, rep, "stripe")
	if st.Verdict != readiness.NoGo || st.Changed != 10 ||
		!findingWith(st.Problems, "`pending_webhooks` changed in 10 of 10 repeats", "add `pending_webhooks` to `ignore`") {
		t.Errorf("stripe: %s, changed %d, problems %+v; want not ready, 10, pending_webhooks → ignore", st.Verdict, st.Changed, st.Problems)
	}
	if len(st.ChangedFields) != 1 || st.ChangedFields[0].Suggest != "ignore" {
		t.Errorf("stripe: changed fields %+v, want pending_webhooks only", st.ChangedFields)
	}

	sh := senderReport(t, rep, "shop")
	if sh.Verdict != readiness.NoGo || sh.Changed != 1 || sh.ExactRepeats != 4 ||
		!findingWith(sh.Problems, "two payloads per key differ in `refundId`", "add `refundId` to the key") {
		t.Errorf("shop: %s, changed %d, repeats %d, problems %+v; want not ready, refundId → key", sh.Verdict, sh.Changed, sh.ExactRepeats, sh.Problems)
	}
	if len(sh.ChangedFields) != 1 || sh.ChangedFields[0].Example != "7" {
		t.Errorf("shop: changed fields %+v, want refundId with example key 7", sh.ChangedFields)
	}

	lg := senderReport(t, rep, "legacy")
	if lg.Verdict != readiness.NoGo || lg.NotSuccess != 24 ||
		!findingWith(lg.Problems, "the site answered 200 24 times without the body \"OK{form.id}\"", "check the success rule") {
		t.Errorf("legacy: %s, not success %d, problems %+v; want not ready, 24, check the success rule", lg.Verdict, lg.NotSuccess, lg.Problems)
	}

	// The unknown provider is reported for its path, not against robokassa.
	if len(rep.Paths) != 1 || rep.Paths[0].Path != "/bitrix/tools/sale_ps_result.php" || rep.Paths[0].Deliveries != 5 ||
		!strings.Contains(rep.Paths[0].Finding.What, "5 deliveries on /bitrix/tools/sale_ps_result.php matched no sender") ||
		!strings.Contains(rep.Paths[0].Finding.Fix, "add a sender") {
		t.Fatalf("unmatched paths: %+v", rep.Paths)
	}
	shape := rep.Paths[0].Shapes[0].Shape
	if shape != "POST; form: PaymentId,Status,TerminalKey,Token" {
		t.Errorf("unmatched shape %q, want the method and the field names", shape)
	}
	for _, v := range []string{"CONFIRMED", "shop"} {
		if strings.Contains(shape, v) {
			t.Errorf("unmatched shape %q holds the value %q", shape, v)
		}
	}

	// One sender, by name; an unknown one is exit 3.
	if one, code := readinessJSON(t, "--store", store, "--config", cfgFile, "--sender", "robokassa"); code != exitOK || len(one.Senders) != 1 || !one.GoLive {
		t.Errorf("readiness --sender robokassa: exit %d, %+v; want 0, robokassa ready", code, one)
	}
	if _, errOut, code := hookonce(t, "readiness", "--store", store, "--config", cfgFile, "--sender", "nobody"); code != exitNotFound || !strings.Contains(errOut, "nobody") {
		t.Errorf("readiness --sender nobody: exit %d, %s; want 3", code, errOut)
	}
	if _, _, code := hookonce(t, "readiness", "--store", store); code != exitUsage {
		t.Errorf("readiness without --config: exit %d, want 2", code)
	}
	out, _, code := hookonce(t, "readiness", "--store", store, "--config", cfgFile)
	for _, want := range []string{"robokassa: READY", "stripe: NOT READY", "add `pending_webhooks` to `ignore`", "add `refundId` to the key",
		"path /bitrix/tools/sale_ps_result.php: 5 deliveries matched no sender"} {
		if !strings.Contains(out, want) {
			t.Errorf("readiness text lacks %q:\n%s", want, out)
		}
	}
	if code != exitNoGo {
		t.Errorf("readiness text: exit %d, want %d", code, exitNoGo)
	}

	// Go live with robokassa: the ready sender goes to enforce, the rest
	// stay in shadow; the same traffic again, and new payments with
	// their retries.
	writeFile(t, cfgFile, fmt.Sprintf(readinessConfig, "enforce"))
	m.Reload()
	before := map[string]int{}
	for _, d := range mix {
		before[d.path+" "+d.body] = site.Executions(runKey(d.path, d.body))
	}
	send(t, base, mix)
	next := recordedMix(1000)
	send(t, base, next)
	for _, d := range mix {
		k := d.path + " " + d.body
		n := site.Executions(runKey(d.path, d.body)) - before[k]
		switch {
		case strings.Contains(d.body, "ROBOXCHANGE"):
			if n != 0 {
				t.Errorf("enforce: a payment already done ran the handler %d more times: %s", n, d.body)
			}
		case n != sent[k]:
			t.Errorf("shadow: %s %s ran %d times on the second replay, sent %d", d.path, d.body, n, sent[k])
		}
	}
	for _, d := range next {
		if strings.Contains(d.body, "ROBOXCHANGE") {
			if n := site.Executions(runKey(d.path, d.body)); n != 1 {
				t.Errorf("enforce: a new payment ran the handler %d times, want once: %s", n, d.body)
			}
		}
	}
}

// The page and the gauge read the same report through serve.
func TestReadinessPageAndGauge(t *testing.T) {
	old := readinessEvery
	readinessEvery = 100 * time.Millisecond
	t.Cleanup(func() { readinessEvery = old })
	dir := t.TempDir()
	site := newShopSite(t)
	cfgFile := filepath.Join(dir, "hookonce.yaml")
	writeFile(t, cfgFile, fmt.Sprintf(readinessConfig, "shadow"))
	cfg := DefaultConfig()
	cfg.ConfigPath, cfg.Upstream, cfg.Store = cfgFile, site.URL, "sqlite:"+filepath.Join(dir, "h.db")
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	m := NewMain(cfg, "test", io.Discard)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	send(t, "http://"+m.Addr().String(), recordedMix(0))
	admin := "http://" + m.AdminAddr().String()
	want := []string{`hookonce_sender_ready{sender="legacy"} 0`, `hookonce_sender_ready{sender="robokassa"} 1`,
		`hookonce_sender_ready{sender="shop"} 0`, `hookonce_sender_ready{sender="stripe"} 0`}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, metrics := httpGet(t, admin+"/metrics", "")
		missing := slices.DeleteFunc(slices.Clone(want), func(w string) bool { return strings.Contains(metrics, w) })
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %v", missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The counters reach the store once a second: the gauges can settle
	// on an early flush before the last deliveries (the unknown provider's)
	// are in.
	for {
		code, page := httpGet(t, admin+"/ui/readiness", "")
		if code == 200 && strings.Contains(page, `data-sender="robokassa" data-verdict="ready"`) &&
			strings.Contains(page, `href="/ui/events/shop/7"`) && strings.Contains(page, "matched no sender") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/ui/readiness answered %d:\n%s", code, page)
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, body := httpGet(t, admin+"/v1/readiness", "")
	var rep readiness.Report
	if code != 200 || json.Unmarshal([]byte(body), &rep) != nil || len(rep.Senders) != 4 {
		t.Fatalf("/v1/readiness answered %d: %s", code, body)
	}
}

// A preset whose provider documents how long it waits is judged against
// that; another sender against its upstream_timeout.
func TestReadinessSendersTimeout(t *testing.T) {
	t.Setenv("RD_SECRET", "s3cret")
	ct, err := contract.Parse([]byte(`
senders:
  - name: gh
    preset: github
    match: { path: /hooks/github }
    signature: { secret_env: RD_SECRET }
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
    upstream_timeout: 12s
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ss := ReadinessSenders(ct)
	if ss[0].Timeout != 10*time.Second || !strings.Contains(ss[0].TimeoutFrom, "github") || !ss[0].Signed {
		t.Errorf("gh: %+v", ss[0])
	}
	if ss[1].Timeout != 12*time.Second || ss[1].TimeoutFrom != "upstream_timeout" || ss[1].Signed || ss[1].Keys[0] != "body:id" {
		t.Errorf("shop: %+v", ss[1])
	}
}
