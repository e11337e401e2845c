package cli

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe/readiness"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// The first report names the field and a safe fix, with the defaults:
// every sender in shadow mode, store_request_body off, so the store keeps
// no body and no value, only each record's field fingerprint. A
// hand-written Stripe sender (raw hash) whose resends differ in
// pending_webhooks is told `hash: json` and `ignore`; an RBS sender with
// an older key (mdOrder, operation, amount) whose GET callbacks bring two
// partial refunds per order is told to key on refundedAmount; a ready
// sender stays ready; Robokassa (the preset, whose InvId is unique per
// notification) with one changed amount and one forged signature from a
// stranger is never told to key on OutSum or SignatureValue.

const firstPassSecret = "robokassa-password-2"

const firstPassConfig = `
senders:
  - name: stripe
    mode: shadow
    match: { path: /webhooks/stripe }
    key: [ { body: id } ]
  - name: rbs
    mode: shadow
    match: { path: /payment/rbs.php, method: "GET,POST" }
    key: [ { request: mdOrder }, { request: operation }, { request: amount } ]
  - name: shop
    mode: shadow
    match: { path: /webhooks/shop }
    key: [ { body: orderId } ]
  - name: robokassa
    preset: robokassa
    mode: shadow
    match: { path: /robokassa/result.php }
    signature: { secret_env: FIRST_PASS_ROBOKASSA }
`

// Values the shop's deliveries carry beyond their keys: none of them may
// reach the store.
const (
	knownEmail = "buyer-4417@example.test"
	knownOrder = "SHOP-ORDER-88231"
)

// newFirstPassSite is a counting site (proxytest.Site) that answers as
// the shop does: Robokassa's result script "OK<InvId>", the rest 200 JSON.
func newFirstPassSite(t *testing.T) *proxytest.Site {
	return proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/robokassa/result.php" {
			fmt.Fprintf(w, "OK%s", r.Form.Get("InvId"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	})
}

// firstPassDelivery is one delivery: method, path (with its query), body,
// and whether it comes from a stranger's network (127.0.1.1; the rest
// from 127.0.0.1).
type firstPassDelivery struct {
	method, target, ctype, body string
	stranger                    bool
}

func robokassaForm(inv int, sum, sig string) string {
	if sig == "" {
		h := md5.Sum([]byte(sum + ":" + fmt.Sprint(inv) + ":" + firstPassSecret))
		sig = strings.ToUpper(hex.EncodeToString(h[:]))
	}
	return url.Values{"InvId": {fmt.Sprint(inv)}, "OutSum": {sum}, "SignatureValue": {sig}, "Email": {knownEmail}}.Encode()
}

func firstPassMix() []firstPassDelivery {
	var out []firstPassDelivery
	// Stripe: 20 events, every other one sent again twice with
	// pending_webhooks counting down (10 changed payloads).
	st := func(i, pending int) firstPassDelivery {
		return firstPassDelivery{"POST", "/webhooks/stripe", "application/json",
			fmt.Sprintf(`{"id":"evt_%d","object":"event","data":{"object":{"amount":%d,"receipt_email":%q}},"pending_webhooks":%d}`, i, 1000+i, knownEmail, pending), false}
	}
	for i := range 20 {
		out = append(out, st(i, 3))
		if i%4 == 0 {
			out = append(out, st(i, 2), st(i, 1))
		}
	}
	// RBS: GET callbacks; 22 orders deposited, 3 of them retried exactly;
	// orders 0-4 refunded twice in part (the older key does not tell the
	// two refunds apart: 5 changed payloads).
	rbs := func(i int, op string, refunded int) firstPassDelivery {
		q := url.Values{"mdOrder": {fmt.Sprintf("md-%d", i)}, "orderNumber": {fmt.Sprintf("%s-%d", knownOrder, i)}, "operation": {op},
			"status": {"1"}, "amount": {"10000"}}
		if refunded > 0 {
			q.Set("refundedAmount", fmt.Sprint(refunded))
		}
		q.Set("checksum", fmt.Sprintf("%X", md5.Sum([]byte(q.Encode()))))
		return firstPassDelivery{"GET", "/payment/rbs.php?" + q.Encode(), "", "", false}
	}
	for i := range 22 {
		out = append(out, rbs(i, "deposited", 0))
		if i%8 == 1 {
			out = append(out, rbs(i, "deposited", 0))
		}
	}
	for i := range 5 {
		out = append(out, rbs(i, "refunded", 3000), rbs(i, "refunded", 6000))
	}
	// The ready sender: 22 orders, 4 exact retries.
	for i := range 22 {
		d := firstPassDelivery{"POST", "/webhooks/shop", "application/json", fmt.Sprintf(`{"orderId":"o-%d","email":%q}`, i, knownEmail), false}
		out = append(out, d)
		if i%6 == 0 {
			out = append(out, d)
		}
	}
	// Robokassa: 24 paid invoices, 3 retried exactly; invoice 5 again with
	// another amount (validly signed), and invoice 6 with another amount
	// and a forged signature, both from a stranger's network.
	for i := range 24 {
		d := firstPassDelivery{"POST", "/robokassa/result.php", "application/x-www-form-urlencoded", robokassaForm(i, "100.00", ""), false}
		out = append(out, d)
		if i%8 == 0 {
			out = append(out, d)
		}
	}
	out = append(out,
		firstPassDelivery{"POST", "/robokassa/result.php", "application/x-www-form-urlencoded", robokassaForm(5, "1.00", ""), true},
		firstPassDelivery{"POST", "/robokassa/result.php", "application/x-www-form-urlencoded", robokassaForm(6, "1.00", "0BADC0DE0BADC0DE0BADC0DE0BADC0DE"), true})
	return out
}

func sendFirstPass(t *testing.T, base string, mix []firstPassDelivery) {
	t.Helper()
	home := &http.Client{}
	stranger := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.1.1")}}).DialContext}}
	defer stranger.CloseIdleConnections()
	for _, d := range mix {
		req, err := http.NewRequest(d.method, base+d.target, strings.NewReader(d.body))
		if err != nil {
			t.Fatal(err)
		}
		if d.ctype != "" {
			req.Header.Set("Content-Type", d.ctype)
		}
		c := home
		if d.stranger {
			c = stranger
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func TestReadinessFirstPassNamesTheFix(t *testing.T) {
	t.Setenv("FIRST_PASS_ROBOKASSA", firstPassSecret)
	dir := t.TempDir()
	site := newFirstPassSite(t)
	cfgFile := filepath.Join(dir, "hookonce.yaml")
	writeFile(t, cfgFile, firstPassConfig)
	dbFile := filepath.Join(dir, "h.db")
	store := "sqlite:" + dbFile
	cfg := DefaultConfig()
	cfg.ConfigPath, cfg.Upstream, cfg.Store = cfgFile, site.URL, store
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	m := NewMain(cfg, "test", io.Discard)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	mix := firstPassMix()
	sendFirstPass(t, "http://"+m.Addr().String(), mix)
	if n := site.Total(); n != len(mix) {
		t.Errorf("shadow mode: the site ran %d deliveries, %d were sent", n, len(mix))
	}

	var rep readiness.Report
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		rep, _ = readinessJSON(t, "--store", store, "--config", cfgFile)
		total := int64(0)
		for _, s := range rep.Senders {
			total += s.Deliveries
		}
		if total == int64(len(mix)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the report counts %d deliveries, %d were sent", total, len(mix))
		}
	}

	// JSON.
	st := senderReport(t, rep, "stripe")
	if st.Verdict != readiness.NoGo || st.Changed != 10 ||
		!findingWith(st.Problems, "`pending_webhooks` changed in 10 of 10 repeats", "set `hash: json` and add `pending_webhooks` to `ignore`") {
		t.Errorf("stripe: %s, changed %d, problems %+v; want pending_webhooks → hash: json + ignore", st.Verdict, st.Changed, st.Problems)
	}
	rb := senderReport(t, rep, "rbs")
	if rb.Verdict != readiness.NoGo || rb.Changed != 5 || !findingWith(rb.Problems, "`refundedAmount`", "add `refundedAmount` to the key") {
		t.Errorf("rbs: %s, changed %d, fields %+v, problems %+v; want refundedAmount → the key", rb.Verdict, rb.Changed, rb.ChangedFields, rb.Problems)
	}
	if sh := senderReport(t, rep, "shop"); sh.Verdict != readiness.GoLive {
		t.Errorf("shop: %s (%s) %+v, want ready", sh.Verdict, sh.Reason, sh.Problems)
	}
	rk := senderReport(t, rep, "robokassa")
	for _, f := range append(rk.Problems, rk.Notes...) {
		for _, field := range []string{"OutSum", "SignatureValue"} {
			if strings.Contains(f.Fix, "`"+field+"` to the key") || strings.Contains(f.Fix, "add `"+field+"`") {
				t.Errorf("robokassa told to key on %s: %+v", field, f)
			}
		}
	}
	if rk.Verdict != readiness.GoLive || rk.RefusedStrangers != 1 || rk.Changed != 1 ||
		!findingWith(rk.Notes, "refused strangers", "127.0.1.0/24") || !findingWith(rk.Notes, "`OutSum`", "possible tampering") {
		t.Errorf("robokassa: %s (%s), strangers %d, changed %d, problems %+v, notes %+v; want ready, the stranger and the changed amount noted",
			rk.Verdict, rk.Reason, rk.RefusedStrangers, rk.Changed, rk.Problems, rk.Notes)
	}

	// The text, as printed.
	out, _, _ := hookonce(t, "readiness", "--store", store, "--config", cfgFile)
	for _, want := range []string{"set `hash: json` and add `pending_webhooks` to `ignore`", "add `refundedAmount` to the key", "shop: READY", "robokassa: READY"} {
		if !strings.Contains(out, want) {
			t.Errorf("the text lacks %q:\n%s", want, out)
		}
	}

	// The page, rendered (no backticks).
	admin := "http://" + m.AdminAddr().String()
	code, page := httpGet(t, admin+"/ui/readiness", "")
	page = html.UnescapeString(page)
	for _, want := range []string{"<code>pending_webhooks</code>", "<code>ignore</code>", "add <code>refundedAmount</code> to the key",
		`data-sender="shop" data-verdict="ready"`} {
		if code != 200 || !strings.Contains(page, want) {
			t.Errorf("/ui/readiness (%d) lacks %s", code, want)
		}
	}
	if strings.Contains(page, "`") {
		t.Error("/ui/readiness shows a literal backtick")
	}

	// The fix, as told: the Stripe sender's rules change, and the report
	// counts afresh from them (the changed payloads before the fix are
	// not held against it); --since counts them again.
	writeFile(t, cfgFile, strings.Replace(firstPassConfig, "    key: [ { body: id } ]\n", "    key: [ { body: id } ]\n    hash: json\n    ignore: [pending_webhooks]\n", 1))
	m.Reload()
	var fresh []firstPassDelivery
	for i := 100; i < 120; i++ {
		for pending := 3; pending > 0 && (pending == 3 || i%4 == 0); pending-- {
			fresh = append(fresh, firstPassDelivery{"POST", "/webhooks/stripe", "application/json",
				fmt.Sprintf(`{"id":"evt_%d","object":"event","pending_webhooks":%d}`, i, pending), false})
		}
	}
	sendFirstPass(t, "http://"+m.Addr().String(), fresh)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		rep, _ = readinessJSON(t, "--store", store, "--config", cfgFile, "--sender", "stripe")
		if st = senderReport(t, rep, "stripe"); st.Deliveries == int64(len(fresh)) || time.Now().After(deadline) {
			break
		}
	}
	if st.Verdict != readiness.GoLive || st.Deliveries != int64(len(fresh)) || st.EarlierRules != 30 || st.RulesSince.IsZero() {
		t.Errorf("stripe after the fix: %s (%s), deliveries %d, earlier %d, since %v; want ready on the %d deliveries under the new rules",
			st.Verdict, st.Reason, st.Deliveries, st.EarlierRules, st.RulesSince, len(fresh))
	}
	out, _, _ = hookonce(t, "readiness", "--store", store, "--config", cfgFile, "--sender", "stripe")
	if !strings.Contains(out, "counted since they last changed") || !strings.Contains(out, "30 deliveries under earlier rules not counted") {
		t.Errorf("the text does not say the count starts at the fix:\n%s", out)
	}
	all, _ := readinessJSON(t, "--store", store, "--config", cfgFile, "--sender", "stripe", "--since", time.Now().UTC().Format(time.DateOnly))
	if a := senderReport(t, all, "stripe"); a.Deliveries != int64(30+len(fresh)) || a.Changed != 10 {
		t.Errorf("--since today: deliveries %d, changed %d; want %d and the 10 from before the fix", a.Deliveries, a.Changed, 30+len(fresh))
	}

	// No body and no value reached the store: only names and digests.
	m.Close()
	for _, f := range []string{dbFile, dbFile + "-wal"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, v := range []string{knownEmail, knownOrder, `"pending_webhooks"`, "receipt_email\":"} {
			if strings.Contains(string(data), v) {
				t.Errorf("%s holds %q", filepath.Base(f), v)
			}
		}
	}
}

// list --value finds a payment by a field of its request that is not in
// its key (the shop's order number), through the records' fingerprints:
// the store holds no value to search.
func TestListByFieldValue(t *testing.T) {
	t.Setenv("FIRST_PASS_ROBOKASSA", firstPassSecret)
	dir := t.TempDir()
	site := newFirstPassSite(t)
	cfgFile := filepath.Join(dir, "hookonce.yaml")
	writeFile(t, cfgFile, firstPassConfig)
	store := "sqlite:" + filepath.Join(dir, "h.db")
	cfg := DefaultConfig()
	cfg.ConfigPath, cfg.Upstream, cfg.Store = cfgFile, site.URL, store
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	m := NewMain(cfg, "test", io.Discard)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sendFirstPass(t, "http://"+m.Addr().String(), firstPassMix())
	m.Close()

	keys := func(args ...string) []string {
		t.Helper()
		out, errOut, code := hookonce(t, append([]string{"list", "--store", store, "--json"}, args...)...)
		if code != exitOK {
			t.Fatalf("list %v: exit %d %s", args, code, errOut)
		}
		var got []struct{ Sender, Key string }
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("list %v: %v\n%s", args, err, out)
		}
		var ks []string
		for _, r := range got {
			ks = append(ks, r.Sender+"/"+r.Key)
		}
		slices.Sort(ks)
		return ks
	}
	order := knownOrder + "-3"
	if got := keys("--value", order); !slices.Equal(got, []string{"rbs/md-3:deposited:10000", "rbs/md-3:refunded:10000"}) {
		t.Errorf("list --value %s: %v, want order md-3's deposit and refund", order, got)
	}
	if got := keys("--value", order, "--field", "orderNumber", "--sender", "rbs", "--limit", "1"); len(got) != 1 {
		t.Errorf("list --value --field orderNumber --limit 1: %v, want one record", got)
	}
	for _, args := range [][]string{{"--value", knownOrder}, {"--value", order, "--field", "mdOrder"}, {"--value", "10000", "--field", "refundedAmount"}} {
		if got := keys(args...); len(got) != 0 {
			t.Errorf("list %v: %v, want none (a prefix, another field, a value never sent there)", args, got)
		}
	}
	if got := keys("--value", "3000", "--field", "refundedAmount"); len(got) != 5 {
		t.Errorf("list --value 3000 --field refundedAmount: %v, want the 5 first refunds", got)
	}
}
