package proxy_test

// Issue 42, the callbacks nobody listed: RBS's card binding callbacks,
// PayKeeper without its optional fields, CDEK's other event types and
// WooCommerce's ping, each sent through a proxy in front of a counting
// site and judged by executions of the site's handler. The signers here
// are the tests' own, from the providers' documentation and modules.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/proxy/proxytest"
)

// TestRBSBindingCallbacks: bindingCreated and bindingActivityChanged
// carry neither mdOrder nor status (the gateway's callback documentation,
// "Additional callback parameters": bindingId, enabled). A card saved is
// keyed by its bindingId, once; switching a card off, on and off again
// sends alike callbacks, and each one reaches the site.
func TestRBSBindingCallbacks(t *testing.T) {
	const secret = "rbs-callback-key"
	t.Setenv("BX_SECRET", secret)
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	px := proxytest.Start(t, newStore(t), site.URL, "senders:\n  - name: s\n    preset: rbs\n    match: { path: /rbs/callback.php }\n"+
		"    signature: { secret_env: BX_SECRET }\n")
	send := func(method, label string, p map[string]string) proxytest.Reply {
		q := rbsParams(secret, p).Encode()
		if method == "GET" {
			return bxSend(t, "GET", px.URL+"/rbs/callback.php?"+q, "", "", "X-Event-Id", label)
		}
		return bxSend(t, "POST", px.URL+"/rbs/callback.php", bxForm, q, "X-Event-Id", label)
	}
	created := func(binding string) map[string]string {
		return map[string]string{"operation": "bindingCreated", "bindingId": binding, "clientId": "c-7", "panMasked": "411111**1111"}
	}
	activity := func(enabled string) map[string]string {
		return map[string]string{"operation": "bindingActivityChanged", "bindingId": "b-1", "enabled": enabled, "clientId": "c-7"}
	}
	for i, step := range []struct {
		method, label string
		p             map[string]string
		runs          int
		replayed      bool
	}{
		{"GET", "created-1", created("b-1"), 1, false},
		{"GET", "created-1", created("b-1"), 1, true}, // the gateway's retry
		{"POST", "created-2", created("b-2"), 1, false},
		{"POST", "created-2", created("b-2"), 1, true},
		{"GET", "off", activity("false"), 1, false},
		{"GET", "on", activity("true"), 1, false},
		{"GET", "off", activity("false"), 2, false}, // off again: alike, and it must run
		{"GET", "no-id", map[string]string{"operation": "bindingCreated", "clientId": "c-7"}, 1, false},
	} {
		got := send(step.method, step.label, step.p)
		if got.Status != 200 || got.Replayed() != step.replayed || site.Executions(step.label) != step.runs {
			t.Fatalf("step %d %s: %d replayed=%v executions %d; want replayed=%v, %d runs\n%s", i, step.label, got.Status, got.Replayed(),
				site.Executions(step.label), step.replayed, step.runs, px.Logs.String())
		}
	}
	if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "s", "outcome", "missing_key"); n != 0 {
		t.Fatalf("missing_key %v: a binding callback was refused", n)
	}
	// A forged binding callback is still refused before the site.
	forged := rbsParams("another-key", created("b-9"))
	if got := bxSend(t, "GET", px.URL+"/rbs/callback.php?"+forged.Encode(), "", "", "X-Event-Id", "forged"); got.Status != 401 || site.Executions("forged") != 0 {
		t.Fatalf("forged: %d, executions %d; want 401 and none", got.Status, site.Executions("forged"))
	}
}

// TestPayKeeperOptionalFieldsAndSum: PayKeeper documents clientid and
// orderid as not required, and its own Bitrix module signs sum with two
// decimals. A notification without them, with sum spelled "100" or
// "100.00", is valid: the site's "OK md5(id + secret)" comes back, the
// handler runs once and PayKeeper's repeat is replayed.
func TestPayKeeperOptionalFieldsAndSum(t *testing.T) {
	t.Setenv("MORE_SECRET", moreSecret)
	site := proxytest.NewSite(t, moreSite)
	px := proxytest.Start(t, newStore(t), site.URL, moreConfig)
	// Signed as PayKeeper signs: id, the sum with two decimals, clientid
	// and orderid as sent (nothing when absent), the secret word.
	notify := func(id, sum, signedSum string, extra ...string) string {
		v := url.Values{"id": {id}, "sum": {sum}}
		msg := id + signedSum
		for i := 0; i+1 < len(extra); i += 2 {
			v.Set(extra[i], extra[i+1])
			msg += extra[i+1]
		}
		v.Set("key", md5hex(msg+moreSecret))
		return v.Encode()
	}
	for _, tc := range []struct{ label, body string }{
		{"pk-bare-100", notify("5001", "100", "100.00")},
		{"pk-bare-100.00", notify("5002", "100.00", "100.00")},
		{"pk-client-only", notify("5003", "100", "100.00", "clientid", "Иванов Иван")},
		{"pk-order-only", notify("5004", "99.5", "99.50", "orderid", "78")},
	} {
		id, _ := url.ParseQuery(tc.body)
		want := "OK " + md5hex(id.Get("id")+moreSecret)
		for i, replayed := range []bool{false, true} {
			got := bxSend(t, "POST", px.URL+"/paykeeper/result.php", bxForm, tc.body, "X-Event-Id", tc.label)
			if got.Status != 200 || string(got.Body) != want || got.Replayed() != replayed || site.Executions(tc.label) != 1 {
				t.Fatalf("%s delivery %d: %d %q replayed=%v executions %d; want %q, replayed=%v, one run\n%s", tc.label, i+1, got.Status, got.Body,
					got.Replayed(), site.Executions(tc.label), want, replayed, px.Logs.String())
			}
		}
	}
	// The sum signed as sent without decimals is not PayKeeper's
	// signature, nor is a forged key: both are refused before the site.
	for _, body := range []string{notify("5005", "100", "100"), strings.Replace(notify("5006", "100", "100.00"), "sum=100", "sum=200", 1)} {
		if got := bxSend(t, "POST", px.URL+"/paykeeper/result.php", bxForm, body, "X-Event-Id", "pk-forged"); got.Status != 401 {
			t.Fatalf("%s: %d, want 401", body, got.Status)
		}
	}
	if n := site.Executions("pk-forged"); n != 0 {
		t.Fatalf("a forged notification ran %d times", n)
	}
}

// TestCDEKOtherTypes: CDEK documents four event types and adds more; it
// never resends. An event of another type about an order that already had
// an ORDER_STATUS runs, a later one of that type runs, and one of that
// type, entity and second that still differs runs too; an exact copy is
// replayed.
func TestCDEKOtherTypes(t *testing.T) {
	t.Setenv("MORE_SECRET", moreSecret)
	site := proxytest.NewSite(t, moreSite)
	px := proxytest.Start(t, newStore(t), site.URL, moreConfig)
	event := func(typ, at, attrs string) string {
		return `{"type":"` + typ + `","date_time":"` + at + `","uuid":"72753031-a","attributes":` + attrs + `}`
	}
	status := event("ORDER_STATUS", "2026-01-15T14:30:00+0300",
		`{"is_return":false,"cdek_number":"1106207236","status_code":"CREATED","status_date_time":"2026-01-15T14:30:00+0300","city_name":"Москва","city_code":"44"}`)
	for i, step := range []struct {
		label, body string
		runs        int
		replayed    bool
	}{
		{"status", status, 1, false},
		{"problem-1", event("DELIV_PROBLEM", "2026-01-17T12:00:00+0300", `{"code":"41"}`), 1, false},
		{"problem-2", event("DELIV_PROBLEM", "2026-01-18T12:00:00+0300", `{"code":"41"}`), 1, false},
		{"problem-3", event("DELIV_PROBLEM", "2026-01-18T12:00:00+0300", `{"code":"42"}`), 1, false}, // same second, another event
		{"modified", event("ORDER_MODIFIED", "2026-01-18T12:00:00+0300", `{"fields":["recipient"]}`), 1, false},
		{"problem-1", event("DELIV_PROBLEM", "2026-01-17T12:00:00+0300", `{"code":"41"}`), 1, true}, // an exact copy
		{"status", status, 1, true},
	} {
		got := bxSend(t, "POST", px.URL+"/cdek/hook.php?token="+moreSecret, "application/json", step.body, "X-Event-Id", step.label)
		if got.Status != 200 || got.Replayed() != step.replayed || site.Executions(step.label) != step.runs {
			t.Fatalf("step %d %s: %d replayed=%v executions %d; want replayed=%v, %d runs\n%s", i, step.label, got.Status, got.Replayed(),
				site.Executions(step.label), step.replayed, step.runs, px.Logs.String())
		}
	}
	if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "cdek", "outcome", "conflict"); n != 0 {
		t.Fatalf("%v conflicts: a CDEK event was refused, and CDEK does not resend", n)
	}
}

// TestWooCommercePing: saving a webhook makes WooCommerce post
// webhook_id=<id> with no signature (WC_Webhook::deliver_ping) and show
// an error unless it hears 200. hookonce answers it 200 itself, the site
// never sees it; a forged delivery, a ping-shaped request with a bad
// signature, and one that adds anything to the ping's body are still
// refused; a signed delivery is forwarded as before.
func TestWooCommercePing(t *testing.T) {
	t.Setenv("MORE_SECRET", moreSecret)
	site := proxytest.NewSite(t, moreSite)
	px := proxytest.Start(t, newStore(t), site.URL, moreConfig)
	sig := func(secret, body string) string {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(body))
		return base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	send := func(label, ctype, body string, header ...string) proxytest.Reply {
		return bxSend(t, "POST", px.URL+"/wc/hook.php", ctype, body, append([]string{"X-Event-Id", label, "User-Agent", "WooCommerce/9.4.2 Hookshot (WordPress/6.7)"}, header...)...)
	}
	for i := range 2 { // saved twice: answered twice
		if got := send("ping", bxForm+"; charset=UTF-8", "webhook_id=17"); got.Status != 200 || site.Executions("ping") != 0 {
			t.Fatalf("ping %d: %d %q, executions %d; want 200 from hookonce, none at the site", i+1, got.Status, got.Body, site.Executions("ping"))
		}
	}
	if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "wc", "outcome", "ping"); n != 2 {
		t.Fatalf("ping outcome %v, want 2", n)
	}
	body := `{"id":812,"status":"processing"}`
	for _, tc := range []struct {
		what, ctype, body string
		header            []string
	}{
		{"a delivery without a signature", "application/json", body, nil},
		{"a delivery with a forged signature", "application/json", body, []string{"X-WC-Webhook-Signature", sig("guess", body)}},
		{"a ping with a forged signature", bxForm, "webhook_id=17", []string{"X-WC-Webhook-Signature", sig("guess", "webhook_id=17")}},
		{"a ping that carries more", bxForm, "webhook_id=17&status=completed", nil},
		{"a ping with a JSON body", "application/json", `{"webhook_id":17}`, nil},
	} {
		if got := send("forged", tc.ctype, tc.body, tc.header...); got.Status != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", tc.what, got.Status)
		}
	}
	if n := site.Executions("forged"); n != 0 {
		t.Fatalf("forged deliveries ran %d times", n)
	}
	if got := send("signed", "application/json", body, "X-WC-Webhook-Signature", sig(moreSecret, body)); got.Status != 200 || site.Executions("signed") != 1 {
		t.Fatalf("a signed delivery: %d, executions %d; want it forwarded", got.Status, site.Executions("signed"))
	}
}
