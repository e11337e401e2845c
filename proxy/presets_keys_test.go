package proxy_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// Issue 30: a key part is a claim that it names one notification. These
// tests count executions at a real upstream for the notifications that a
// too-coarse key used to swallow (replay) or refuse (422), and for their
// documented retries, which must still be answered once.

// concurrently runs fn n times at once and waits for all.
func concurrently(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fn(i) })
	}
	wg.Wait()
}

// slowSite answers 200 "ok" after work, so deliveries that are let
// through together overlap at the site (Peak tells).
func slowSite(t *testing.T, work time.Duration) *proxytest.Site {
	return proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(work)
		io.WriteString(w, "ok")
	})
}

// startPreset starts hookonce with one sender name of preset on
// /hooks/<preset>, signing with secret, before a counting site.
func startPreset(t *testing.T, name, preset, secret string) (*proxytest.Site, *proxytest.Instance) {
	t.Setenv("PRESET_SECRET", secret)
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, newStore(t), site.URL, "senders:\n  - name: "+name+"\n    preset: "+preset+
		"\n    match: { path: /hooks/"+preset+" }\n    signature: { secret_env: PRESET_SECRET }\n")
	return site, px
}

// TestRBSRefunds: the RBS callback's amount is the order's registered
// amount, the same on every callback of one order, and refundedAmount and
// operationRefundedAmount are each documented as "the refund amount", so
// none of them tells two equal refunds apart. A refund that carries
// externalRefundId (the refund's id, which the gateway itself keeps
// unique) runs once and its repeat is replayed; a reversal, which a
// payment has once, likewise; any other refund is forwarded without
// dedupe (counted as passthrough, logged with why), by GET and by POST,
// and serialize by mdOrder keeps two of them from running together.
func TestRBSRefunds(t *testing.T) {
	const secret = "rbs-callback-key"
	t.Setenv("BX_SECRET", secret)
	start := func(t *testing.T, store dedupe.Store, site *proxytest.Site, extra string) *proxytest.Instance {
		return proxytest.Start(t, store, site.URL, "senders:\n  - name: s\n    preset: rbs\n    match: { path: /rbs/callback.php }\n"+
			"    signature: { secret_env: BX_SECRET }\n"+extra)
	}
	send := func(t *testing.T, px *proxytest.Instance, method, label string, p map[string]string) proxytest.Reply {
		q := rbsParams(secret, p).Encode()
		if method == "GET" {
			return bxSend(t, "GET", px.URL+"/rbs/callback.php?"+q, "", "", "X-Event-Id", label)
		}
		return bxSend(t, "POST", px.URL+"/rbs/callback.php", bxForm, q, "X-Event-Id", label)
	}
	refund := func(order string, kv ...string) map[string]string {
		p := map[string]string{"mdOrder": order, "orderNumber": "9_5_0", "operation": "refunded", "status": "1", "amount": "150000"}
		for i := 0; i+1 < len(kv); i += 2 {
			p[kv[i]] = kv[i+1]
		}
		return p
	}

	t.Run("optional parameters name each refund", func(t *testing.T) {
		site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		px := start(t, newStore(t), site, "")
		for _, method := range []string{"GET", "POST"} {
			order := "md-opt-" + method
			steps := []struct {
				label string
				p     map[string]string
			}{
				{"ext-1", refund(order, "externalRefundId", "rf-1", "operationRefundedAmount", "20000")},
				{"ext-2", refund(order, "externalRefundId", "rf-2", "operationRefundedAmount", "20000")},
				{"reversal", refund(order+"-rev", "operation", "reversed")},
			}
			for _, replayed := range []bool{false, true} {
				for _, st := range steps {
					label := method + "/" + st.label
					got := send(t, px, method, label, st.p)
					if got.Status != 200 || got.Replayed() != replayed || site.Executions(label) != 1 {
						t.Fatalf("%s: %d replayed=%v executions %d; want replayed=%v and one run", label, got.Status, got.Replayed(), site.Executions(label), replayed)
					}
				}
			}
		}
		if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "s", "outcome", "passthrough"); n != 0 {
			t.Fatalf("passthrough %v, want 0: every refund had an id", n)
		}
	})

	t.Run("basic parameters only reach the site every time", func(t *testing.T) {
		site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
		store := newStore(t)
		px := start(t, store, site, "")
		for _, method := range []string{"GET", "POST"} {
			// Two refunds of one order, byte for byte alike: no key can
			// tell them apart, so neither may be swallowed.
			order := "md-basic-" + method
			for i := 1; i <= 2; i++ {
				got := send(t, px, method, method, refund(order))
				if got.Status != 200 || got.Replayed() || site.Executions(method) != i {
					t.Fatalf("%s refund %d: %d replayed=%v executions %d; want the site run", method, i, got.Status, got.Replayed(), site.Executions(method))
				}
			}
			ctNoRecord(t, store, order+":refunded:1")
		}
		// Two equal partial refunds with the amounts switched on (and
		// refundedDate, which made the second a 422 when the amount was a
		// key): each reaches the site, neither is swallowed or refused.
		for i, extra := range [][]string{
			{"operationRefundedAmount", "20000", "refundedAmount", "20000"},
			{"operationRefundedAmount", "20000", "refundedAmount", "20000"},
			{"operationRefundedAmount", "20000", "refundedDate", "2026-01-15 10:00:00"},
			{"operationRefundedAmount", "20000", "refundedDate", "2026-01-15 11:00:00"},
		} {
			got := send(t, px, "GET", "equal", refund("md-equal", extra...))
			if got.Status != 200 || got.Replayed() || site.Executions("equal") != i+1 {
				t.Fatalf("equal refund %d: %d replayed=%v executions %d; want the site run", i+1, got.Status, got.Replayed(), site.Executions("equal"))
			}
		}
		if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "s", "outcome", "passthrough"); n != 8 {
			t.Fatalf("passthrough %v, want 8", n)
		}
		if logs := px.Logs.String(); !strings.Contains(logs, `"outcome":"passthrough"`) || !strings.Contains(logs, "without externalRefundId") {
			t.Fatalf("the log does not say why the refunds were forwarded:\n%s", logs)
		}
		// Another operation without its status is still refused, never
		// forwarded: only the refund shape passes without a key.
		got := send(t, px, "GET", "no-status", map[string]string{"mdOrder": "md-x", "operation": "deposited"})
		if got.Status != http.StatusBadRequest || site.Executions("no-status") != 0 {
			t.Fatalf("a deposit without status: %d, executions %d; want 400", got.Status, site.Executions("no-status"))
		}
	})

	t.Run("serialize by mdOrder", func(t *testing.T) {
		site := slowSite(t, 150*time.Millisecond)
		px := start(t, newStore(t), site, "    serialize: { key: [ { request: mdOrder } ] }\n")
		replies := make([]proxytest.Reply, 3)
		concurrently(3, func(i int) { replies[i] = send(t, px, "GET", "ser", refund("md-ser")) })
		for i, r := range replies {
			if r.Status != 200 || r.Replayed() {
				t.Fatalf("refund %d: %d replayed=%v", i, r.Status, r.Replayed())
			}
		}
		if site.Executions("ser") != 3 || site.Peak() != 1 {
			t.Fatalf("executions %d, peak %d; want 3 runs, one at a time", site.Executions("ser"), site.Peak())
		}
	})
}

// TestBitrix24SameSecondBothRun: two changes of one deal within one second
// are two ONCRMDEALUPDATE events with the same event, ID and ts, each with
// fresh auth. Both run; with serialize by the deal's ID they run one after
// the other.
func TestBitrix24SameSecondBothRun(t *testing.T) {
	t.Setenv("BX_SECRET", "b24-application-token")
	send := func(t *testing.T, px *proxytest.Instance, access string) proxytest.Reply {
		f := url.Values{"event": {"ONCRMDEALUPDATE"}, "event_handler_id": {"201"}, "data[FIELDS][ID]": {"759"}, "ts": {"1736405807"},
			"auth[access_token]": {access}, "auth[expires_in]": {"3600"}, "auth[domain]": {"shop.bitrix24.ru"},
			"auth[member_id]": {"a223c6b3"}, "auth[application_token]": {"b24-application-token"}}
		return bxSend(t, "POST", px.URL+"/b24/handler.php", bxForm, f.Encode(), "X-Event-Id", "deal-759")
	}
	const cfg = "senders:\n  - name: s\n    preset: bitrix24\n    match: { path: /b24/handler.php }\n    signature: { secret_env: BX_SECRET }\n"
	t.Run("one after the other", func(t *testing.T) {
		site := proxytest.NewSite(t, nil)
		px := proxytest.Start(t, newStore(t), site.URL, cfg)
		for i, access := range []string{"s6p6eclrvim6da22", "k2q9dmw0pq1xza7b"} {
			if got := send(t, px, access); got.Status != 200 || got.Replayed() || site.Executions("deal-759") != i+1 {
				t.Fatalf("change %d: %d replayed=%v executions %d; want the site run", i+1, got.Status, got.Replayed(), site.Executions("deal-759"))
			}
		}
	})
	t.Run("together, serialized by the deal", func(t *testing.T) {
		site := slowSite(t, 150*time.Millisecond)
		px := proxytest.Start(t, newStore(t), site.URL, cfg+"    serialize: { key: [ { form: \"data[FIELDS][ID]\" } ] }\n")
		replies := make([]proxytest.Reply, 2)
		concurrently(2, func(i int) { replies[i] = send(t, px, fmt.Sprintf("access-%d", i)) })
		for i, r := range replies {
			if r.Status != 200 || r.Replayed() {
				t.Fatalf("change %d: %d replayed=%v", i+1, r.Status, r.Replayed())
			}
		}
		if site.Executions("deal-759") != 2 || site.Peak() != 1 {
			t.Fatalf("executions %d, peak %d; want both run, one at a time", site.Executions("deal-759"), site.Peak())
		}
	})
}

// TestGitHubTwoHooksOneURL: one event reaches a repository hook and a
// GitHub App on the same URL, each signing with its own secret (both
// listed under signature.secrets). X-GitHub-Delivery is the event's id,
// shared by both; X-GitHub-Hook-ID tells them apart. Each hook's delivery
// runs once; a redelivery of either is replayed; a third secret is 401.
func TestGitHubTwoHooksOneURL(t *testing.T) {
	t.Setenv("GH_REPO_SECRET", "repo-hook-secret")
	t.Setenv("GH_APP_SECRET", "app-secret")
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, newStore(t), site.URL, `
senders:
  - name: gh
    preset: github
    match: { path: /hooks/github }
    signature:
      secrets:
        - secret_env: GH_REPO_SECRET
        - secret_env: GH_APP_SECRET
`)
	const delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	deliver := func(hook, secret, body string) proxytest.Reply {
		sig := "sha256=" + bxHex(bxMAC(secret, body))
		return proxytest.Post(t, px.URL+"/hooks/github", body, "X-GitHub-Delivery", delivery, "X-GitHub-Hook-ID", hook,
			"X-GitHub-Event", "issues", "X-Hub-Signature-256", sig, "X-Event-Id", "hook-"+hook)
	}
	repoBody := `{"action":"opened","issue":{"number":7},"repository":{"id":1296269}}`
	appBody := `{"action":"opened","issue":{"number":7},"repository":{"id":1296269},"installation":{"id":2}}`
	for _, replayed := range []bool{false, true} {
		if got := deliver("292430182", "repo-hook-secret", repoBody); got.Status != 200 || got.Replayed() != replayed || site.Executions("hook-292430182") != 1 {
			t.Fatalf("repository hook: %d replayed=%v executions %d; want replayed=%v, one run", got.Status, got.Replayed(), site.Executions("hook-292430182"), replayed)
		}
		if got := deliver("382930291", "app-secret", appBody); got.Status != 200 || got.Replayed() != replayed || site.Executions("hook-382930291") != 1 {
			t.Fatalf("app hook: %d replayed=%v executions %d; want replayed=%v, one run", got.Status, got.Replayed(), site.Executions("hook-382930291"), replayed)
		}
	}
	if got := deliver("1", "another-secret", repoBody); got.Status != http.StatusUnauthorized || site.Executions("hook-1") != 0 {
		t.Fatalf("a third secret: %d, executions %d; want 401", got.Status, site.Executions("hook-1"))
	}
	if strings.Contains(px.Logs.String(), "repo-hook-secret") || strings.Contains(px.Logs.String(), "app-secret") {
		t.Fatal("the log quotes a secret")
	}
}

// TestShopifyTwoSubscriptions: a shop with two subscriptions to one topic
// on one URL (one with include_fields) gets two webhooks with one
// X-Shopify-Event-Id and different bodies. The handler runs once, the
// second copy gets the first's answer (never 422), and its retry too.
func TestShopifyTwoSubscriptions(t *testing.T) {
	site, px := startPreset(t, "shop", "shopify", "shpss_current")
	send := func(webhook, body string) proxytest.Reply {
		sig := base64.StdEncoding.EncodeToString(bxMAC("shpss_current", body))
		return proxytest.Post(t, px.URL+"/hooks/shopify", body, "X-Shopify-Event-Id", "98880550-7158-44d4-b7cd-2c97c8a091b5",
			"X-Shopify-Webhook-Id", webhook, "X-Shopify-Topic", "orders/create", "X-Shopify-Hmac-Sha256", sig, "X-Event-Id", "order-820982911946154508")
	}
	full := `{"id":820982911946154508,"email":"jon@example.com","total_price":"403.00","line_items":[{"id":1,"quantity":1}]}`
	trimmed := `{"id":820982911946154508,"total_price":"403.00"}`
	first := send("b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", full)
	if first.Status != 200 || first.Replayed() || site.Executions("order-820982911946154508") != 1 {
		t.Fatalf("first subscription: %d replayed=%v executions %d", first.Status, first.Replayed(), site.Executions("order-820982911946154508"))
	}
	for i := range 2 {
		got := send("0f1c4b2e-5e2a-4b8d-9d0e-4a1b2c3d4e5f", trimmed)
		if got.Status != 200 || !got.Replayed() || string(got.Body) != string(first.Body) || site.Executions("order-820982911946154508") != 1 {
			t.Fatalf("second subscription, try %d: %d replayed=%v %q executions %d; want the first's answer", i+1, got.Status, got.Replayed(), got.Body, site.Executions("order-820982911946154508"))
		}
	}
	if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "shop", "outcome", "conflict"); n != 0 {
		t.Fatalf("%v conflicts, want none", n)
	}
}

// TestStripeRetryWithOtherPendingWebhooks: Stripe renders pending_webhooks
// for each delivery; a retry after the site's success, sent when another
// endpoint has meanwhile succeeded, carries another count. It is replayed,
// not refused; a changed amount under the event's id is still a conflict.
func TestStripeRetryWithOtherPendingWebhooks(t *testing.T) {
	site, px := startPreset(t, "stripe", "stripe", "whsec_live_current")
	send := func(pending, amount int) proxytest.Reply {
		body := fmt.Sprintf(`{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","api_version":"2022-11-15","created":1686089970,`+
			`"data":{"object":{"id":"pi_3MtwBwLkdIwHu7ix28a3tqPa","object":"payment_intent","amount":%d}},"livemode":false,`+
			`"pending_webhooks":%d,"request":{"id":null,"idempotency_key":null},"type":"payment_intent.succeeded"}`, amount, pending)
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		sig := "t=" + ts + ",v1=" + bxHex(bxMAC("whsec_live_current", ts+"."+body))
		return proxytest.Post(t, px.URL+"/hooks/stripe", body, "Stripe-Signature", sig)
	}
	const id = "evt_1NG8Du2eZvKYlo2CUI79vXWy"
	if got := send(2, 2000); got.Status != 200 || got.Replayed() || site.Executions(id) != 1 {
		t.Fatalf("first delivery: %d replayed=%v executions %d", got.Status, got.Replayed(), site.Executions(id))
	}
	for _, pending := range []int{1, 0} {
		if got := send(pending, 2000); got.Status != 200 || !got.Replayed() || site.Executions(id) != 1 {
			t.Fatalf("retry with pending_webhooks %d: %d replayed=%v executions %d; want replayed", pending, got.Status, got.Replayed(), site.Executions(id))
		}
	}
	if got := send(1, 9999); got.Status != http.StatusUnprocessableEntity || site.Executions(id) != 1 {
		t.Fatalf("changed amount: %d executions %d; want 422", got.Status, site.Executions(id))
	}
}

// TestYooKassaSuccessIsExactly200: YooKassa takes only 200 as received.
// A site's 204 or 201 goes back to YooKassa but is not stored: the claim
// is freed, YooKassa's retry runs the handler again; its 200 is stored
// and replayed.
func TestYooKassaSuccessIsExactly200(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		switch n {
		case 1:
			w.WriteHeader(http.StatusNoContent)
		case 2:
			w.WriteHeader(http.StatusCreated)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	store := newStore(t)
	px := proxytest.Start(t, store, site.URL, "trusted_proxies: [127.0.0.1]\nsenders:\n  - name: s\n    preset: yookassa\n    match: { path: /yookassa/notify.php }\n")
	const pay = "22e12f66-000f-5000-8000-18db351245c7"
	body := `{"type":"notification","event":"payment.succeeded","object":{"id":"` + pay + `","status":"succeeded","amount":{"value":"2.00","currency":"RUB"}}}`
	send := func() proxytest.Reply {
		return bxSend(t, "POST", px.URL+"/yookassa/notify.php", "application/json", body, "X-Forwarded-For", "185.71.76.5", "X-Event-Id", pay)
	}
	for i, want := range []int{http.StatusNoContent, http.StatusCreated} {
		if got := send(); got.Status != want || got.Replayed() || site.Executions(pay) != i+1 {
			t.Fatalf("try %d: %d replayed=%v executions %d; want the site's %d", i+1, got.Status, got.Replayed(), site.Executions(pay), want)
		}
		proxytest.AssertFreed(t, store, "s", pay+":payment.succeeded")
	}
	if got := send(); got.Status != 200 || got.Replayed() || site.Executions(pay) != 3 {
		t.Fatalf("third try: %d replayed=%v executions %d; want 200 run", got.Status, got.Replayed(), site.Executions(pay))
	}
	if got := send(); got.Status != 200 || !got.Replayed() || site.Executions(pay) != 3 {
		t.Fatalf("after the 200: %d replayed=%v executions %d; want replayed", got.Status, got.Replayed(), site.Executions(pay))
	}
	if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "s", "outcome", "not_success"); n != 2 {
		t.Fatalf("not_success %v, want 2", n)
	}
}

// TestChangedPayloadPolicies: the operator's changed_payload on a generic
// sender. conflict (the default) answers 422 and runs nothing; duplicate
// answers the first's stored answer; new_event runs the changed payload
// as its own event, whose own retry is replayed.
func TestChangedPayloadPolicies(t *testing.T) {
	for _, tt := range []struct {
		policy   string
		status   int
		replayed bool
		runs     int
	}{
		{"", http.StatusUnprocessableEntity, false, 1},
		{"changed_payload: conflict", http.StatusUnprocessableEntity, false, 1},
		{"changed_payload: duplicate", 200, true, 1},
		{"changed_payload: new_event", 200, false, 2},
	} {
		t.Run(tt.policy, func(t *testing.T) {
			site := proxytest.NewSite(t, nil)
			px := proxytest.Start(t, newStore(t), site.URL, "senders:\n  - name: s\n    match: { path: /hook }\n    key: [ { body: id } ]\n    "+tt.policy+"\n")
			if got := proxytest.Post(t, px.URL+"/hook", `{"id":"e1","v":1}`); got.Status != 200 || site.Executions("e1") != 1 {
				t.Fatalf("first: %d executions %d", got.Status, site.Executions("e1"))
			}
			got := proxytest.Post(t, px.URL+"/hook", `{"id":"e1","v":2}`)
			if got.Status != tt.status || got.Replayed() != tt.replayed || site.Executions("e1") != tt.runs {
				t.Fatalf("changed payload: %d replayed=%v executions %d; want %d replayed=%v, %d runs", got.Status, got.Replayed(), site.Executions("e1"), tt.status, tt.replayed, tt.runs)
			}
			// Each payload's own retry.
			for _, body := range []string{`{"id":"e1","v":1}`, `{"id":"e1","v":2}`} {
				again := proxytest.Post(t, px.URL+"/hook", body)
				if site.Executions("e1") != tt.runs || (again.Status == 200 && !again.Replayed()) {
					t.Fatalf("retry of %s: %d replayed=%v executions %d; want no run", body, again.Status, again.Replayed(), site.Executions("e1"))
				}
			}
			conflicts := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "s", "outcome", "conflict")
			if wantConflicts := map[bool]float64{true: 2, false: 0}[tt.status == 422]; conflicts != wantConflicts {
				t.Fatalf("conflicts %v, want %v", conflicts, wantConflicts)
			}
		})
	}
}

// TestForwardWithoutDedupe: dedupe: off forwards every delivery of a
// sender (serialized when serialize is set); no_dedupe forwards the shapes
// it names, and every other delivery of the sender is still deduplicated.
// Each such delivery is counted as passthrough and logged with its reason.
func TestForwardWithoutDedupe(t *testing.T) {
	t.Run("dedupe off, serialized", func(t *testing.T) {
		site := slowSite(t, 100*time.Millisecond)
		px := proxytest.Start(t, newStore(t), site.URL, `
senders:
  - name: amo
    match: { path: /amo }
    dedupe: off
    serialize: { key: [ { body: lead } ] }
`)
		replies := make([]proxytest.Reply, 3)
		concurrently(3, func(i int) {
			replies[i] = proxytest.Post(t, px.URL+"/amo", `{"lead":"5"}`, "X-Event-Id", "lead-5")
		})
		for i, r := range replies {
			if r.Status != 200 || r.Replayed() {
				t.Fatalf("delivery %d: %d replayed=%v", i, r.Status, r.Replayed())
			}
		}
		if site.Executions("lead-5") != 3 || site.Peak() != 1 {
			t.Fatalf("executions %d peak %d; want 3 runs one at a time", site.Executions("lead-5"), site.Peak())
		}
		if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "amo", "outcome", "passthrough"); n != 3 {
			t.Fatalf("passthrough %v, want 3", n)
		}
		if !strings.Contains(px.Logs.String(), `"reason":"dedupe: off"`) {
			t.Fatalf("no reason in the log:\n%s", px.Logs.String())
		}
	})
	t.Run("no_dedupe shapes", func(t *testing.T) {
		site := proxytest.NewSite(t, nil)
		px := proxytest.Start(t, newStore(t), site.URL, `
senders:
  - name: s
    match: { path: /hook }
    key: [ { body: id } ]
    no_dedupe:
      - when: [ { body: type, equals: ping } ]
        reason: pings carry a reused id
`)
		for i := 1; i <= 2; i++ {
			if got := proxytest.Post(t, px.URL+"/hook", `{"id":"p","type":"ping"}`); got.Status != 200 || got.Replayed() || site.Executions("p") != i {
				t.Fatalf("ping %d: %d replayed=%v executions %d", i, got.Status, got.Replayed(), site.Executions("p"))
			}
		}
		for i := range 2 {
			if got := proxytest.Post(t, px.URL+"/hook", `{"id":"o","type":"order"}`); got.Status != 200 || got.Replayed() != (i == 1) || site.Executions("o") != 1 {
				t.Fatalf("order %d: %d replayed=%v executions %d", i, got.Status, got.Replayed(), site.Executions("o"))
			}
		}
		if !strings.Contains(px.Logs.String(), "pings carry a reused id") {
			t.Fatalf("no reason in the log:\n%s", px.Logs.String())
		}
	})
}

// TestShopifySecondCopyWhileTheFirstRuns: the second subscription's copy
// arrives while the first is still at the site. It waits for it and gets
// its answer: one run, no 409 and no 422.
func TestShopifySecondCopyWhileTheFirstRuns(t *testing.T) {
	t.Setenv("PRESET_SECRET", "shpss_current")
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		io.WriteString(w, `{"saved":true}`)
	})
	px := proxytest.Start(t, newStore(t), site.URL, "senders:\n  - name: shop\n    preset: shopify\n    match: { path: /hooks/shopify }\n    signature: { secret_env: PRESET_SECRET }\n")
	send := func(webhook, body string) proxytest.Reply {
		sig := base64.StdEncoding.EncodeToString(bxMAC("shpss_current", body))
		return proxytest.Post(t, px.URL+"/hooks/shopify", body, "X-Shopify-Event-Id", "5b0c8f1e-7d2a-4c3b-9e1f-0a2b3c4d5e6f",
			"X-Shopify-Webhook-Id", webhook, "X-Shopify-Topic", "orders/paid", "X-Shopify-Hmac-Sha256", sig, "X-Event-Id", "order-7")
	}
	replies := make([]proxytest.Reply, 2)
	concurrently(2, func(i int) {
		if i == 1 {
			time.Sleep(50 * time.Millisecond) // the first is at the site by now
			replies[i] = send("wh-trimmed", `{"id":7}`)
			return
		}
		replies[i] = send("wh-full", `{"id":7,"email":"jon@example.com"}`)
	})
	first, second := replies[0], replies[1]
	if first.Status != 200 || first.Replayed() {
		t.Fatalf("first copy: %d replayed=%v", first.Status, first.Replayed())
	}
	if second.Status != 200 || !second.Replayed() || string(second.Body) != string(first.Body) || site.Executions("order-7") != 1 {
		t.Fatalf("second copy: %d replayed=%v %q executions %d; want the first's answer after waiting", second.Status, second.Replayed(), second.Body, site.Executions("order-7"))
	}
}

// TestAmoCRMForwardedSerialized: amoCRM names no notification and signs
// nothing. Its preset checks the URL's token and forwards every delivery:
// two identical posts (two changes of one deal that look alike) both run,
// with serialize by the deal one after the other; a wrong token runs
// nothing.
func TestAmoCRMForwardedSerialized(t *testing.T) {
	t.Setenv("AMO_TOKEN", "amo-url-token")
	f := url.Values{"leads[status][0][id]": {"25399013"}, "leads[status][0][status_id]": {"142"},
		"leads[status][0][pipeline_id]": {"3104455"}, "account[subdomain]": {"shop"}}
	site := slowSite(t, 150*time.Millisecond)
	px := proxytest.Start(t, newStore(t), site.URL, `
senders:
  - name: amo
    preset: amocrm
    match: { path: /amo/hook.php }
    signature: { secret_env: AMO_TOKEN }
    serialize: { key: [ { form: "leads[status][0][id]" } ] }
`)
	send := func(token string) proxytest.Reply {
		return bxSend(t, "POST", px.URL+"/amo/hook.php?token="+token, bxForm, f.Encode(), "X-Event-Id", "lead-25399013")
	}
	if r := send("guess"); r.Status != http.StatusUnauthorized || site.Executions("lead-25399013") != 0 {
		t.Fatalf("wrong token: %d, executions %d; want 401 and none", r.Status, site.Executions("lead-25399013"))
	}
	replies := make([]proxytest.Reply, 2)
	concurrently(2, func(i int) { replies[i] = send("amo-url-token") })
	for i, r := range replies {
		if r.Status != 200 || r.Replayed() {
			t.Fatalf("delivery %d: %d replayed=%v; want the site's answer", i+1, r.Status, r.Replayed())
		}
	}
	if site.Executions("lead-25399013") != 2 || site.Peak() != 1 {
		t.Fatalf("executions %d, peak %d; want both run, one at a time", site.Executions("lead-25399013"), site.Peak())
	}
	if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "amo", "outcome", "passthrough"); n != 2 {
		t.Errorf("passthrough counted %v times, want 2", n)
	}
}
