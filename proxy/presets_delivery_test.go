package proxy_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// Issue 42: read each sender's delivery structure, not only its dedupe
// advice. One merchant action sends several Shopify topics under one
// X-Shopify-Event-Id; Stripe's API-version upgrade sends one event to two
// endpoints on one URL; and a sender that retries anything but a 2xx does
// not take a site's 404 as delivered. Each test counts executions at a
// real upstream.

// TestShopifyTopicsOfOneAction: orders/create, orders/paid and
// orders/updated of one checkout share X-Shopify-Event-Id ("shared across
// all deliveries produced by the same merchant action") and carry a
// Webhook-Id each. Each topic runs once; a retry of each is replayed; a
// second subscription to orders/paid (its own Webhook-Id, a trimmed body)
// gets the first's answer and runs nothing.
func TestShopifyTopicsOfOneAction(t *testing.T) {
	site, px := startPreset(t, "shop", "shopify", "shpss_current")
	const event = "98880550-7158-44d4-b7cd-2c97c8a091b5"
	send := func(topic, webhook, body string) proxytest.Reply {
		sig := base64.StdEncoding.EncodeToString(bxMAC("shpss_current", body))
		return proxytest.Post(t, px.URL+"/hooks/shopify", body, "X-Shopify-Topic", topic, "X-Shopify-Event-Id", event,
			"X-Shopify-Webhook-Id", webhook, "X-Shopify-Hmac-Sha256", sig, "X-Shopify-Triggered-At", "2026-12-03T10:00:00Z",
			"X-Event-Id", topic)
	}
	topics := []struct{ topic, webhook, body string }{
		{"orders/create", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", `{"id":820982911946154508,"financial_status":"pending"}`},
		{"orders/paid", "c1d2e3f4-1b2c-4d3e-8f4a-5b6c7d8e9f0a", `{"id":820982911946154508,"financial_status":"paid"}`},
		{"orders/updated", "d2e3f4a5-2c3d-4e4f-9a5b-6c7d8e9f0a1b", `{"id":820982911946154508,"financial_status":"paid","updated_at":"2026-12-03T10:00:00Z"}`},
	}
	first := map[string]proxytest.Reply{}
	for _, tp := range topics {
		got := send(tp.topic, tp.webhook, tp.body)
		if got.Status != 200 || got.Replayed() || site.Executions(tp.topic) != 1 {
			t.Fatalf("%s: %d replayed=%v executions %d; want it run once", tp.topic, got.Status, got.Replayed(), site.Executions(tp.topic))
		}
		first[tp.topic] = got
	}
	for _, tp := range topics {
		got := send(tp.topic, tp.webhook, tp.body)
		if got.Status != 200 || !got.Replayed() || string(got.Body) != string(first[tp.topic].Body) || site.Executions(tp.topic) != 1 {
			t.Fatalf("%s retry: %d replayed=%v executions %d; want the stored answer", tp.topic, got.Status, got.Replayed(), site.Executions(tp.topic))
		}
	}
	got := send("orders/paid", "0f1c4b2e-5e2a-4b8d-9d0e-4a1b2c3d4e5f", `{"id":820982911946154508}`)
	if got.Status != 200 || !got.Replayed() || string(got.Body) != string(first["orders/paid"].Body) || site.Executions("orders/paid") != 1 {
		t.Fatalf("second subscription to orders/paid: %d replayed=%v executions %d; want the first's answer", got.Status, got.Replayed(), site.Executions("orders/paid"))
	}
	if site.Total() != 3 {
		t.Fatalf("the site ran %d times, want 3 (one per topic)", site.Total())
	}
	if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "shop", "outcome", "conflict"); n != 0 {
		t.Fatalf("%v conflicts, want none", n)
	}
}

// TestStripeTwoAPIVersionsOneURL: during Stripe's API-version upgrade a
// second endpoint on the same URL (told apart by a query parameter, as
// Stripe's guide suggests) receives the same evt_ rendered in its own
// api_version and signed with its own secret. Both copies reach the site
// once each; the retries of each are replayed; a third secret is 401.
func TestStripeTwoAPIVersionsOneURL(t *testing.T) {
	t.Setenv("STRIPE_OLD_ENDPOINT", "whsec_old_endpoint")
	t.Setenv("STRIPE_NEW_ENDPOINT", "whsec_new_endpoint")
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, newStore(t), site.URL, `
senders:
  - name: stripe
    preset: stripe
    match: { path: /hooks/stripe }
    signature:
      secrets:
        - secret_env: STRIPE_OLD_ENDPOINT
        - secret_env: STRIPE_NEW_ENDPOINT
`)
	const id = "evt_1NG8Du2eZvKYlo2CUI79vXWy"
	send := func(version, secret string, pending int) proxytest.Reply {
		body := `{"id":"` + id + `","object":"event","api_version":"` + version + `","created":1686089970,` +
			`"data":{"object":{"id":"pi_3MtwBwLkdIwHu7ix28a3tqPa","object":"payment_intent","amount":2000}},"livemode":true,` +
			`"pending_webhooks":` + strconv.Itoa(pending) + `,"request":{"id":null,"idempotency_key":null},"type":"payment_intent.succeeded"}`
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		sig := "t=" + ts + ",v1=" + bxHex(bxMAC(secret, ts+"."+body))
		return proxytest.Post(t, px.URL+"/hooks/stripe?version="+version, body, "Stripe-Signature", sig, "X-Event-Id", version)
	}
	copies := []struct{ version, secret string }{{"2024-06-20", "whsec_old_endpoint"}, {"2025-03-31.basil", "whsec_new_endpoint"}}
	for _, c := range copies {
		if got := send(c.version, c.secret, 2); got.Status != 200 || got.Replayed() || site.Executions(c.version) != 1 {
			t.Fatalf("%s copy: %d replayed=%v executions %d; want it run once", c.version, got.Status, got.Replayed(), site.Executions(c.version))
		}
	}
	for _, c := range copies {
		if got := send(c.version, c.secret, 1); got.Status != 200 || !got.Replayed() || site.Executions(c.version) != 1 {
			t.Fatalf("%s retry: %d replayed=%v executions %d; want replayed", c.version, got.Status, got.Replayed(), site.Executions(c.version))
		}
	}
	if got := send("2024-06-20", "whsec_someone_else", 1); got.Status != http.StatusUnauthorized {
		t.Fatalf("a third secret: %d, want 401", got.Status)
	}
	if site.Total() != 2 {
		t.Fatalf("the site ran %d times, want 2 (one per API version)", site.Total())
	}
	if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "stripe", "outcome", "conflict"); n != 0 {
		t.Fatalf("%v conflicts, want none", n)
	}
}

// TestRetryAfterA404ReachesTheSite: the site answers the first delivery
// 404 (a deploy in progress), then 200. For a sender that retries
// anything but a 2xx, the 404 goes back to it and is not stored, so its
// retry runs the handler: two calls in all, one record, done with the
// 200, and the next retry replays that. With final_statuses naming 404
// the operator keeps the old behaviour: the 404 is stored and replayed.
func TestRetryAfterA404ReachesTheSite(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	now := func() string { return strconv.FormatInt(time.Now().Unix(), 10) }
	senders := []struct {
		preset string
		key    string // the record's key
		send   func(t *testing.T, url string) proxytest.Reply
	}{
		{"stripe", "evt_404:2024-06-20", func(t *testing.T, url string) proxytest.Reply {
			body := `{"id":"evt_404","object":"event","api_version":"2024-06-20","type":"invoice.paid","pending_webhooks":1}`
			ts := now()
			return proxytest.Post(t, url, body, "Stripe-Signature", "t="+ts+",v1="+bxHex(bxMAC(secret, ts+"."+body)))
		}},
		{"shopify", "orders/paid:ev-404", func(t *testing.T, url string) proxytest.Reply {
			body := `{"id":404}`
			return proxytest.Post(t, url, body, "X-Shopify-Topic", "orders/paid", "X-Shopify-Event-Id", "ev-404", "X-Shopify-Webhook-Id", "wh-404",
				"X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(bxMAC(secret, body)))
		}},
		{"standard-webhooks", "msg_404", func(t *testing.T, url string) proxytest.Reply {
			body := `{"type":"invoice.paid"}`
			key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
			ts := now()
			sig := base64.StdEncoding.EncodeToString(bxMAC(string(key), "msg_404."+ts+"."+body))
			return proxytest.Post(t, url, body, "Webhook-Id", "msg_404", "Webhook-Timestamp", ts, "Webhook-Signature", "v1,"+sig)
		}},
		{"telegram", "404", func(t *testing.T, url string) proxytest.Reply {
			return proxytest.Post(t, url, `{"update_id":404,"message":{"message_id":1,"date":0,"chat":{"id":1,"type":"private"},"text":"/start"}}`,
				"X-Telegram-Bot-Api-Secret-Token", secret)
		}},
		{"slack", "Ev404", func(t *testing.T, url string) proxytest.Reply {
			body := `{"type":"event_callback","event_id":"Ev404","event":{"type":"app_mention"}}`
			ts := now()
			return proxytest.Post(t, url, body, "X-Slack-Request-Timestamp", ts, "X-Slack-Signature", "v0="+bxHex(bxMAC(secret, "v0:"+ts+":"+body)))
		}},
		{"github", "7:72d3162e-cc78-11e3-81ab-4c9367dc0958", func(t *testing.T, url string) proxytest.Reply {
			body := `{"action":"opened"}`
			return proxytest.Post(t, url, body, "X-GitHub-Hook-ID", "7", "X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958",
				"X-GitHub-Event", "issues", "X-Hub-Signature-256", "sha256="+bxHex(bxMAC(secret, body)))
		}},
	}
	for _, sd := range senders {
		for _, stored404 := range []bool{false, true} {
			name := sd.preset
			if stored404 {
				name += " final_statuses 2xx,404"
			}
			t.Run(name, func(t *testing.T) {
				t.Setenv("PRESET_SECRET", secret)
				var mu sync.Mutex
				calls := 0
				site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					calls++
					n := calls
					mu.Unlock()
					if n == 1 {
						http.Error(w, "not found", http.StatusNotFound)
						return
					}
					w.Write([]byte(`{"ok":true}`))
				})
				store := newStore(t)
				cfg := "senders:\n  - name: s\n    preset: " + sd.preset + "\n    match: { path: /hook }\n    signature: { secret_env: PRESET_SECRET }\n"
				if stored404 {
					cfg += "    final_statuses: \"2xx,404\"\n"
				}
				px := proxytest.Start(t, store, site.URL, cfg)
				if got := sd.send(t, px.URL+"/hook"); got.Status != http.StatusNotFound || got.Replayed() {
					t.Fatalf("first delivery: %d replayed=%v; want the site's 404", got.Status, got.Replayed())
				}
				retry := sd.send(t, px.URL+"/hook")
				if stored404 {
					// Telegram's preset answers every repeat 200 with no
					// body: what it would have got for the stored 404,
					// and the update is lost. Hence 2xx only by default.
					want := http.StatusNotFound
					if sd.preset == "telegram" {
						want = http.StatusOK
					}
					if retry.Status != want || !retry.Replayed() || site.Total() != 1 {
						t.Fatalf("retry with 404 final: %d replayed=%v calls %d; want the stored 404 (%d)", retry.Status, retry.Replayed(), site.Total(), want)
					}
					return
				}
				if retry.Status != 200 || retry.Replayed() || site.Total() != 2 {
					t.Fatalf("retry: %d replayed=%v calls %d; want it run at the site", retry.Status, retry.Replayed(), site.Total())
				}
				again := sd.send(t, px.URL+"/hook")
				if again.Status != 200 || !again.Replayed() || site.Total() != 2 {
					t.Fatalf("next retry: %d replayed=%v calls %d; want the stored 200", again.Status, again.Replayed(), site.Total())
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				rec, err := store.Get(ctx, "s", sd.key)
				if err != nil {
					t.Fatal(err)
				}
				if rec.State != dedupe.StateDone || rec.Response == nil || rec.Response.Status != 200 || len(rec.Attempts) != 2 {
					t.Fatalf("record: state %s, response %+v, %d attempts; want done with 200 after 2 attempts", rec.State, rec.Response, len(rec.Attempts))
				}
				if recs, err := store.List(ctx, dedupe.ListFilter{Sender: "s"}); err != nil || len(recs) != 1 {
					t.Fatalf("records: %d, %v; want one", len(recs), err)
				}
			})
		}
	}
}
