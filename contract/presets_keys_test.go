package contract_test

import (
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

// hmacNote is one delivery of a header-signed provider: its headers and
// body, and the notification it is (deliveries of one notification — its
// retries, its redeliveries — share a name).
type hmacNote struct {
	what    string // the notification; retries repeat it
	headers []string
	body    string
}

// TestHMACPresetKeysAndRetries goes through the notifications of the
// header-signed presets, from the providers' own examples: every distinct
// notification gets a distinct key, and every retry the provider
// documents gets the same key and the same payload hash as its first
// delivery (Stripe's pending_webhooks, Slack's retry headers and GitHub's
// redelivery do not change either). Stripe's copy of one event for the
// second endpoint of an API-version upgrade (another api_version) is its
// own notification. Shopify's topics of one merchant action (one
// X-Shopify-Event-Id, a Webhook-Id each) are distinct notifications; its
// second subscription to one topic shares the first's key (see
// TestShopifySecondSubscription), and the preset says that a changed
// payload under it is a duplicate.
func TestHMACPresetKeysAndRetries(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "x")
	t.Setenv("HOOKONCE_WHSEC", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	stripeIn := func(version, id string, pending int, amount string) string {
		// The shape of Stripe's Event object (API reference, "The Event
		// object"); pending_webhooks is rendered for each delivery, and
		// api_version is the rendering endpoint's.
		return `{"id":"` + id + `","object":"event","api_version":"` + version + `","created":1686089970,"data":{"object":{"id":"pi_3MtwBwLkdIwHu7ix28a3tqPa","object":"payment_intent","amount":` +
			amount + `}},"livemode":false,"pending_webhooks":` + strconv.Itoa(pending) + `,"request":{"id":null,"idempotency_key":null},"type":"payment_intent.succeeded"}`
	}
	stripe := func(id string, pending int, amount string) string { return stripeIn("2022-11-15", id, pending, amount) }
	shop := func(topic, webhook string) []string {
		// One merchant action (a checkout): one Event-Id on every topic's
		// delivery, a Webhook-Id per delivery (shopify.dev, "Webhooks
		// delivery structure", Headers).
		return []string{"X-Shopify-Topic", topic, "X-Shopify-Event-Id", "98880550-7158-44d4-b7cd-2c97c8a091b5", "X-Shopify-Webhook-Id", webhook}
	}
	gh := func(hook, delivery string, extra ...string) []string {
		return append([]string{"X-GitHub-Hook-ID", hook, "X-GitHub-Delivery", delivery, "X-GitHub-Event", "issues"}, extra...)
	}
	tests := []struct {
		preset, secret string
		changed        contract.ChangedPolicy
		notes          []hmacNote
	}{
		{"stripe", "HOOKONCE_OK", contract.ChangedConflict, []hmacNote{
			{"evt_1 succeeded", nil, stripe("evt_1NG8Du2eZvKYlo2CUI79vXWy", 2, "2000")},
			{"evt_1 succeeded", nil, stripe("evt_1NG8Du2eZvKYlo2CUI79vXWy", 1, "2000")}, // retry: another endpoint succeeded meanwhile
			{"evt_1 succeeded", nil, stripe("evt_1NG8Du2eZvKYlo2CUI79vXWy", 0, "2000")},
			{"evt_2", nil, stripe("evt_1NG8Du2eZvKYlo2CAmJXZf9c", 1, "2000")},
			{"evt_1 for the upgrade's endpoint", nil, stripeIn("2024-06-20", "evt_1NG8Du2eZvKYlo2CUI79vXWy", 2, "2000")},
			{"evt_1 for the upgrade's endpoint", nil, stripeIn("2024-06-20", "evt_1NG8Du2eZvKYlo2CUI79vXWy", 0, "2000")}, // its retry
		}},
		{"github", "HOOKONCE_OK", contract.ChangedConflict, []hmacNote{
			{"issues.opened to the repository hook", gh("292430182", "72d3162e-cc78-11e3-81ab-4c9367dc0958"), `{"action":"opened","issue":{"number":1}}`},
			{"issues.opened to the repository hook", gh("292430182", "72d3162e-cc78-11e3-81ab-4c9367dc0958"), `{"action":"opened","issue":{"number":1}}`}, // redelivery
			{"issues.opened to the app", gh("382930291", "72d3162e-cc78-11e3-81ab-4c9367dc0958"), `{"action":"opened","issue":{"number":1},"installation":{"id":2}}`},
			{"issues.closed to the repository hook", gh("292430182", "0b989ba4-242f-11e5-81e1-c7b6966d2516"), `{"action":"closed","issue":{"number":1}}`},
		}},
		{"shopify", "HOOKONCE_OK", contract.ChangedDuplicate, []hmacNote{
			{"orders/create", shop("orders/create", "b54557e4-0a1b-4c2d-9e3f-4a5b6c7d8e9f"), `{"id":820982911946154508}`},
			{"orders/create", shop("orders/create", "b54557e4-0a1b-4c2d-9e3f-4a5b6c7d8e9f"), `{"id":820982911946154508}`}, // retry
			{"orders/paid", shop("orders/paid", "c1d2e3f4-1b2c-4d3e-8f4a-5b6c7d8e9f0a"), `{"id":820982911946154508,"financial_status":"paid"}`},
			{"orders/updated", shop("orders/updated", "d2e3f4a5-2c3d-4e4f-9a5b-6c7d8e9f0a1b"), `{"id":820982911946154508,"financial_status":"paid"}`},
			{"orders/updated", shop("orders/updated", "d2e3f4a5-2c3d-4e4f-9a5b-6c7d8e9f0a1b"), `{"id":820982911946154508,"financial_status":"paid"}`}, // retry
			{"orders/create of the next order", []string{"X-Shopify-Topic", "orders/create", "X-Shopify-Event-Id", "1b0e2c4a-95f3-4b7e-8c2d-7f6a5e4d3c2b", "X-Shopify-Webhook-Id", "e3f4"}, `{"id":820982911946154509}`},
		}},
		{"standard-webhooks", "HOOKONCE_WHSEC", contract.ChangedConflict, []hmacNote{
			{"msg 1", []string{"webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp", "1614265330"}, `{"type":"invoice.paid"}`},
			{"msg 1", []string{"webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp", "1614265400"}, `{"type":"invoice.paid"}`}, // resent: same id
			{"msg 2", []string{"webhook-id", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "webhook-timestamp", "1614265330"}, `{"type":"invoice.paid"}`},
		}},
		{"slack", "HOOKONCE_OK", contract.ChangedConflict, []hmacNote{
			{"Ev08MFMKH6", nil, `{"type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention"}}`},
			{"Ev08MFMKH6", []string{"X-Slack-Retry-Num", "1", "X-Slack-Retry-Reason", "http_timeout"}, `{"type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention"}}`},
			{"Ev08MFMKH7", nil, `{"type":"event_callback","event_id":"Ev08MFMKH7","event":{"type":"app_mention"}}`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			s := mustSender(t, "preset: "+tt.preset, "signature: {secret_env: "+tt.secret+"}")
			if s.ChangedPayload != tt.changed {
				t.Errorf("changed_payload %q, want %q", s.ChangedPayload, tt.changed)
			}
			type seen struct{ key, hash string }
			byNote := map[string]seen{}
			byKey := map[string]string{}
			for _, n := range tt.notes {
				req := delivery(t, "POST", "/hook", "application/json", n.body, "", n.headers...)
				key, err := s.Key(req)
				if err != nil {
					t.Fatalf("%s: %v", n.what, err)
				}
				if _, pass := s.Passthrough(req, err); pass {
					t.Errorf("%s: forwarded without dedupe", n.what)
				}
				hash, _, err := s.RequestHash(req)
				if err != nil {
					t.Fatalf("%s: hash: %v", n.what, err)
				}
				if first, ok := byNote[n.what]; ok {
					if first.key != key || first.hash != hash {
						t.Errorf("%s: a retry gets key %q hash %s, the first %q %s", n.what, key, hash, first.key, first.hash)
					}
					continue
				}
				if other, dup := byKey[key]; dup {
					t.Errorf("%s and %s share the key %q", other, n.what, key)
				}
				byNote[n.what], byKey[key] = seen{key, hash}, n.what
			}
		})
	}
}

// TestShopifySecondSubscription: a shop with two subscriptions to one
// topic gets one delivery per subscription for one merchant action, each
// with its own X-Shopify-Webhook-Id and the action's X-Shopify-Event-Id
// (and, with include_fields, another body). Shopify's "Ignore duplicate
// webhooks" calls them duplicates: one key. Without an Event-Id (older
// API versions) the Webhook-Id stands in.
func TestShopifySecondSubscription(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "x")
	s := mustSender(t, "preset: shopify", "signature: {secret_env: HOOKONCE_OK}")
	key := func(body string, kv ...string) string {
		k, err := s.Key(delivery(t, "POST", "/hook", "application/json", body, "", kv...))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	first := key(`{"id":820982911946154508,"total_price":"10.00"}`, "X-Shopify-Topic", "orders/paid", "X-Shopify-Event-Id", "ev-1", "X-Shopify-Webhook-Id", "wh-a")
	second := key(`{"id":820982911946154508}`, "X-Shopify-Topic", "orders/paid", "X-Shopify-Event-Id", "ev-1", "X-Shopify-Webhook-Id", "wh-b")
	if first != second || first != "orders/paid:ev-1" {
		t.Errorf("two subscriptions to orders/paid: keys %q and %q, want one, orders/paid:ev-1", first, second)
	}
	if k := key(`{}`, "X-Shopify-Topic", "orders/paid", "X-Shopify-Webhook-Id", "wh-a"); k != "orders/paid:wh-a" {
		t.Errorf("without an Event-Id: %q, want orders/paid:wh-a", k)
	}
	if _, err := s.Key(delivery(t, "POST", "/hook", "application/json", `{}`, "", "X-Shopify-Event-Id", "ev-1")); err == nil {
		t.Error("a delivery without X-Shopify-Topic has a key (Shopify sends it on every delivery)")
	}
}

// TestStripeHashIgnoresOnlyPerDeliveryFields: leaving pending_webhooks out
// of the hash does not hide a change of the event itself.
func TestStripeHashIgnoresOnlyPerDeliveryFields(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "x")
	s := mustSender(t, "preset: stripe", "signature: {secret_env: HOOKONCE_OK}")
	hash := func(body string) string {
		h, _, err := s.RequestHash(delivery(t, "POST", "/hook", "application/json", body, ""))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a := hash(`{"id":"evt_1","pending_webhooks":2,"data":{"object":{"amount":2000}}}`)
	if b := hash(`{"id":"evt_1","pending_webhooks":1,"data":{"object":{"amount":2000}}}`); a != b {
		t.Error("another pending_webhooks changes the hash")
	}
	if c := hash(`{"id":"evt_1","pending_webhooks":2,"data":{"object":{"amount":2001}}}`); a == c {
		t.Error("another amount keeps the hash")
	}
	// A record stored before (raw bytes) is still this payload's.
	body := `{"id":"evt_1","pending_webhooks":2}`
	if _, legacy, _ := s.RequestHash(delivery(t, "POST", "/hook", "application/json", body, "")); legacy == "" {
		t.Error("no raw-bytes hash for records stored before the preset hashed JSON")
	}
}

// TestDedupeSettings: dedupe, no_dedupe, changed_payload and
// signature.secrets as the file writes them, and every mistake named.
func TestDedupeSettings(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "x")
	t.Setenv("HOOKONCE_OK2", "y")
	ping := delivery(t, "POST", "/hook", "application/json", `{"id":"p","type":"ping"}`, "")
	order := delivery(t, "POST", "/hook", "application/json", `{"id":"o","type":"order"}`, "")

	off := mustSender(t, "dedupe: off")
	if why, ok := off.Passthrough(order, nil); !ok || why != "dedupe: off" || !off.DedupeOff() {
		t.Errorf("dedupe: off without a key: %q %v", why, ok)
	}
	shapes := mustSender(t, "key: [{body: id}]", "no_dedupe:", "  - when: [{body: type, equals: ping}]", "    reason: pings")
	if why, ok := shapes.Passthrough(ping, nil); !ok || why != "pings" {
		t.Errorf("a ping: %q %v; want forwarded, reason pings", why, ok)
	}
	if _, ok := shapes.Passthrough(order, nil); ok || shapes.DedupeOff() {
		t.Error("an order is forwarded without dedupe")
	}
	unkeyed := mustSender(t, "key: [{body: id}]", "no_dedupe: [{when: [{body: type, equals: ping}], if_key_missing: true}]")
	if _, ok := unkeyed.Passthrough(ping, nil); ok {
		t.Error("if_key_missing: a ping with its id is forwarded")
	}
	if why, ok := unkeyed.Passthrough(ping, contract.ErrMissingKey); !ok || why != "no_dedupe[0]" {
		t.Errorf("if_key_missing: a ping without its id: %q %v", why, ok)
	}
	// Bitrix24 turned back on needs a key of the operator's.
	on := mustSender(t, "preset: bitrix24", "signature: {secret_env: HOOKONCE_OK}", "dedupe: on", "key: [{form: event}, {form: \"data[FIELDS][ID]\"}]")
	if on.DedupeOff() {
		t.Error("dedupe: on leaves bitrix24 off")
	}
	if _, ok := on.Passthrough(delivery(t, "POST", "/hook", formType, "event=ONAPPINSTALL", ""), nil); !ok {
		t.Error("dedupe: on drops the preset's named shapes too")
	}
	if s := mustSender(t, "key: [{body: id}]", "changed_payload: new_event"); s.ChangedPayload != contract.ChangedNewEvent {
		t.Errorf("changed_payload %q", s.ChangedPayload)
	}
	if s := mustSender(t, "preset: shopify", "signature: {secret_env: HOOKONCE_OK}", "changed_payload: conflict"); s.ChangedPayload != contract.ChangedConflict {
		t.Errorf("the operator's changed_payload does not override the preset's: %q", s.ChangedPayload)
	}
	two := mustSender(t, "preset: github", "signature: {secrets: [{secret_env: HOOKONCE_OK}, {secret_env: HOOKONCE_OK2}]}")
	for _, secret := range []string{"x", "y"} {
		body := `{"zen":"x"}`
		req := delivery(t, "POST", "/hook", "application/json", body, "", "X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac([]byte(secret), body)))
		if err := two.Verify(req, time.Now()); err != nil {
			t.Errorf("secret %q refused: %v", secret, err)
		}
	}

	for _, tt := range []struct {
		lines []string
		want  string
	}{
		{[]string{"key: [{body: id}]", "dedupe: maybe"}, `field dedupe: "maybe": want on or off`},
		{[]string{"key: [{body: id}]", "no_dedupe: [{reason: x}]"}, "field no_dedupe[0].when: required"},
		{[]string{"key: [{body: id}]", "no_dedupe: [{when: [{body: a}]}]"}, "field no_dedupe[0].when[0]: set exactly one of equals, present or matches"},
		{[]string{"key: [{body: id}]", "changed_payload: replay"}, `field changed_payload: "replay": want one of conflict, duplicate, new_event`},
		{[]string{"preset: bitrix24", "signature: {secret_env: HOOKONCE_OK}", "dedupe: on"}, "field key: required"},
		{[]string{"preset: github", "signature: {secrets: [{}]}"}, "field signature.secrets[0].secret_env: required"},
		{[]string{"preset: github", "signature: {secrets: [{secret_env: HOOKONCE_UNSET_X}]}"}, "environment variable HOOKONCE_UNSET_X is not set"},
		{[]string{"preset: yookassa", "signature: {secrets: [{secret_env: HOOKONCE_OK}]}"}, "field signature.secrets: scheme source-address takes no secret"},
	} {
		_, err := contract.Parse([]byte(senderYAML(tt.lines...)), "test.yaml")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v; want %q", tt.lines, err, tt.want)
		}
	}
}

// TestGitHubKeyWithoutHookID: a delivery without X-GitHub-Hook-ID (a tool,
// a hand-made test) is keyed by its delivery id alone, as before the hook
// id counted, and no such key equals one with a hook id.
func TestGitHubKeyWithoutHookID(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "x")
	s := mustSender(t, "preset: github", "signature: {secret_env: HOOKONCE_OK}")
	key := func(kv ...string) string {
		k, err := s.Key(delivery(t, "POST", "/hook", "application/json", `{}`, "", kv...))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	if k := key("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"); k != "72d3162e-cc78-11e3-81ab-4c9367dc0958" {
		t.Errorf("without a hook id: %q", k)
	}
	if a, b := key("X-GitHub-Delivery", "a:b"), key("X-GitHub-Hook-ID", "a", "X-GitHub-Delivery", "b"); a == b {
		t.Errorf("delivery a:b and hook a + delivery b share the key %q", a)
	}
}

// TestPresetFinalStatuses: a preset for a sender that retries any answer
// but a 2xx (Stripe, Shopify, Slack, Standard Webhooks, Telegram; GitHub's
// redelivery of a failed delivery) stores only a 2xx, so a 404 or 403 is
// handed back and frees the claim; the file's defaults do not undo it,
// and the sender's own final_statuses does. A preset that says nothing
// keeps the built-in 2xx,4xx.
func TestPresetFinalStatuses(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	ok := func(s *contract.Sender, status int) bool {
		got, _ := s.Succeeded(delivery(t, "POST", "/hook", "application/json", `{}`, ""), status, nil)
		return s.Final(status) && got
	}
	for _, p := range []string{"stripe", "github", "shopify", "standard-webhooks", "slack", "telegram"} {
		s := mustSender(t, "preset: "+p, "signature: {secret_env: HOOKONCE_OK}")
		for _, st := range []int{200, 201, 204} {
			if !ok(s, st) {
				t.Errorf("%s: %d is not stored", p, st)
			}
		}
		for _, st := range []int{301, 400, 401, 403, 404, 410, 422, 429, 500, 503} {
			if s.Final(st) {
				t.Errorf("%s: %d is stored; the sender retries it", p, st)
			}
		}
		own := mustSender(t, "preset: "+p, "signature: {secret_env: HOOKONCE_OK}", `final_statuses: "2xx,404"`)
		if !ok(own, 404) || own.Final(403) {
			t.Errorf("%s: the sender's final_statuses 2xx,404 does not replace the preset's", p)
		}
		c, err := contract.Parse([]byte("defaults: {final_statuses: \"2xx,4xx\"}\n"+senderYAML("preset: "+p, "signature: {secret_env: HOOKONCE_OK}")), "test.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if c.Senders[0].Final(404) {
			t.Errorf("%s: the file's defaults make a 404 final again", p)
		}
	}
	if s := mustSender(t, "preset: cdek", "signature: {secret_env: HOOKONCE_OK}"); !s.Final(404) || s.Final(429) {
		t.Error("cdek: a preset that names no final statuses no longer keeps the built-in 2xx,4xx")
	}
	// A preset whose success rule names statuses (YooKassa: 200 only):
	// the sender's final_statuses replaces them too.
	yk := mustSender(t, "preset: yookassa")
	if ok(yk, 204) || ok(yk, 404) || !ok(yk, 200) {
		t.Error("yookassa: want 200 only")
	}
	yk404 := mustSender(t, "preset: yookassa", `final_statuses: "200,404"`)
	if !ok(yk404, 404) || !ok(yk404, 200) || ok(yk404, 204) {
		t.Error("yookassa with final_statuses 200,404: want 200 and 404 stored, 204 not")
	}
}
