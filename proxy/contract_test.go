package proxy_test

// Sender contracts end to end: presets with their signatures, hash: json
// with ignore, composite and form keys, per-sender answers, shadow mode and
// ambiguous: hold, each judged by counting executions at the site.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

func ctMAC(secret []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

// ctPreset signs deliveries the way one sender documents it. The test's
// own signers share no code with contract/.
type ctPreset struct {
	name         string
	current, old string
	timed        bool
	extra        string // more YAML under the sender
	keyHeader    string // the header that carries the event id, if any
	hookID       string // GitHub's X-GitHub-Hook-ID, the key's first part
	topic        string // Shopify's X-Shopify-Topic, the key's first part
	sign         func(secret string, ts int64, id, body string) []string
}

var ctPresets = []ctPreset{
	{
		name: "stripe", current: "whsec_live_current", old: "whsec_live_previous", timed: true,
		sign: func(secret string, ts int64, _, body string) []string {
			t := strconv.FormatInt(ts, 10)
			return []string{"Stripe-Signature", "t=" + t + ",v1=" + hex.EncodeToString(ctMAC([]byte(secret), t, ".", body))}
		},
	},
	{
		name: "github", current: "gh-current", old: "gh-previous", keyHeader: "X-GitHub-Delivery", hookID: "292430182",
		sign: func(secret string, _ int64, _, body string) []string {
			return []string{"X-Hub-Signature-256", "sha256=" + hex.EncodeToString(ctMAC([]byte(secret), body))}
		},
	},
	{
		name: "shopify", current: "shpss_current", old: "shpss_previous", keyHeader: "X-Shopify-Webhook-Id", topic: "orders/paid",
		sign: func(secret string, _ int64, _, body string) []string {
			return []string{"X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(ctMAC([]byte(secret), body))}
		},
	},
	{
		name: "standard-webhooks", current: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", old: "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
		timed: true, keyHeader: "webhook-id",
		sign: func(secret string, ts int64, id, body string) []string {
			key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
			t := strconv.FormatInt(ts, 10)
			return []string{"webhook-timestamp", t,
				"webhook-signature", "v1," + base64.StdEncoding.EncodeToString(ctMAC(key, id, ".", t, ".", body))}
		},
	},
	{
		name: "slack", current: "slack-current", old: "slack-previous", timed: true,
		sign: func(secret string, ts int64, _, body string) []string {
			t := strconv.FormatInt(ts, 10)
			return []string{"X-Slack-Request-Timestamp", t, "X-Slack-Signature", "v0=" + hex.EncodeToString(ctMAC([]byte(secret), "v0:", t, ":", body))}
		},
	},
	{
		name: "hmac-sha256", current: "generic-current", old: "generic-previous", keyHeader: "X-Event-Id",
		extra: "    key: [ { header: X-Event-Id } ]\n",
		sign: func(secret string, _ int64, _, body string) []string {
			return []string{"X-Signature", "sha256=" + hex.EncodeToString(ctMAC([]byte(secret), body))}
		},
	},
}

// wrong is a well-formed secret that is neither the current nor the old.
func (p ctPreset) wrong() string {
	if strings.HasPrefix(p.current, "whsec_") && p.name == "standard-webhooks" {
		return "whsec_" + base64.StdEncoding.EncodeToString([]byte("not the sender's key"))
	}
	return p.current + "x"
}

func (p ctPreset) config() string {
	sig := "    signature: { secret_env: CT_SECRET, previous_secret_env: CT_OLD_SECRET"
	if p.name == "hmac-sha256" {
		sig += `, header: X-Signature, prefix: "sha256="`
	}
	return "senders:\n  - name: s\n    preset: " + p.name + "\n    match: { path: /hooks/" + p.name + " }\n" +
		sig + " }\n" + p.extra
}

// deliver posts one delivery of event id with the given amount, signed with
// secret at ts, and the body possibly changed after signing.
func (p ctPreset) deliver(t *testing.T, url, secret string, ts int64, id string, amount int, tamper bool) proxytest.Reply {
	t.Helper()
	// "id" is what the counting site reads; event_id is Slack's key.
	body := fmt.Sprintf(`{"id":%q,"event_id":%q,"amount":%d}`, id, id, amount)
	headers := p.sign(secret, ts, id, body)
	if p.keyHeader != "" {
		headers = append(headers, p.keyHeader, id)
	}
	if p.hookID != "" {
		headers = append(headers, "X-GitHub-Hook-ID", p.hookID)
	}
	if p.topic != "" {
		headers = append(headers, "X-Shopify-Topic", p.topic)
	}
	if tamper {
		body = fmt.Sprintf(`{"id":%q,"event_id":%q,"amount":%d}`, id, id, amount*10)
	}
	return proxytest.Post(t, url+"/hooks/"+p.name, body, headers...)
}

// key is the stored key of the delivery with event id id.
func (p ctPreset) key(id string) string {
	if p.hookID != "" {
		return p.hookID + ":" + id
	}
	if p.topic != "" {
		return p.topic + ":" + id
	}
	return id
}

func ctNoRecord(t *testing.T, store dedupe.Store, key string) {
	t.Helper()
	if rec, err := get(t, store, "s", key); !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("record for %s = %+v, %v; want none", key, rec, err)
	}
}

func TestPresetSignaturesEndToEnd(t *testing.T) {
	for _, p := range ctPresets {
		t.Run(p.name, func(t *testing.T) {
			t.Setenv("CT_SECRET", p.current)
			t.Setenv("CT_OLD_SECRET", p.old)
			store := newStore(t)
			site := proxytest.NewSite(t, nil)
			px := proxytest.Start(t, store, site.URL, p.config())
			now := time.Now().Unix()

			// Tampered body under the id: 401, no claim, site untouched.
			if got := p.deliver(t, px.URL, p.current, now, "evt_a", 100, true); got.Status != http.StatusUnauthorized {
				t.Fatalf("tampered: %d %s, want 401", got.Status, got.Body)
			}
			ctNoRecord(t, store, p.key("evt_a"))
			// The genuine delivery with that id still runs, once.
			if got := p.deliver(t, px.URL, p.current, now, "evt_a", 100, false); got.Status != 200 || got.Replayed() {
				t.Fatalf("valid after tampered: %d replayed=%v %s", got.Status, got.Replayed(), got.Body)
			}
			if got := p.deliver(t, px.URL, p.current, now, "evt_a", 100, false); got.Status != 200 || !got.Replayed() {
				t.Fatalf("repeat: %d replayed=%v", got.Status, got.Replayed())
			}
			if n := site.Executions("evt_a"); n != 1 {
				t.Fatalf("evt_a executions = %d, want 1", n)
			}
			// Wrong secret.
			if got := p.deliver(t, px.URL, p.wrong(), now, "evt_w", 1, false); got.Status != http.StatusUnauthorized {
				t.Fatalf("wrong secret: %d, want 401", got.Status)
			}
			ctNoRecord(t, store, p.key("evt_w"))
			// Rotation: the previous secret is still accepted.
			if got := p.deliver(t, px.URL, p.old, now, "evt_r", 1, false); got.Status != 200 {
				t.Fatalf("previous secret: %d %s, want 200", got.Status, got.Body)
			}
			if p.timed {
				if got := p.deliver(t, px.URL, p.current, now-3600, "evt_s", 1, false); got.Status != http.StatusUnauthorized {
					t.Fatalf("stale timestamp: %d, want 401", got.Status)
				}
				ctNoRecord(t, store, p.key("evt_s"))
			}
			if site.Executions("evt_w") != 0 || site.Executions("evt_s") != 0 || site.Executions("evt_r") != 1 {
				t.Fatalf("executions: wrong secret %d, stale %d, rotated %d",
					site.Executions("evt_w"), site.Executions("evt_s"), site.Executions("evt_r"))
			}
			if strings.Contains(px.Logs.String(), p.current) || strings.Contains(px.Logs.String(), "amount") {
				t.Fatal("the log quotes a secret or a body")
			}
		})
	}
}

const ctShopConfig = `
senders:
  - name: s
    match: { path: "/api/webhooks/*" }
    key:
      - header: X-Event-Id
      - body: data.order.id
    hash: json
    ignore: [attempt, meta.sent_at]
`

func TestHashJSONIgnoreAndCompositeKey(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, ctShopConfig)
	post := func(body string) proxytest.Reply {
		return proxytest.Post(t, px.URL+"/api/webhooks/orders", body, "X-Event-Id", "order.paid")
	}
	steps := []struct {
		name     string
		body     string
		status   int
		replayed bool
		execs    int
	}{
		{"first", `{"attempt":1,"meta":{"sent_at":"10:00"},"data":{"order":{"id":42,"amount":"10.00"}}}`, 200, false, 1},
		{"other attempt, keys reordered, spaces", `{ "data": {"order": {"amount": "10.00", "id": 42}}, "meta": {"sent_at": "10:05"}, "attempt": 2 }`, 200, true, 1},
		{"changed amount", `{"attempt":3,"data":{"order":{"id":42,"amount":"99.00"}}}`, 422, false, 1},
		{"amount written another way", `{"attempt":4,"data":{"order":{"id":42,"amount":10.00}}}`, 422, false, 1},
		{"other order under the same event header", `{"attempt":1,"data":{"order":{"id":43,"amount":"10.00"}}}`, 200, false, 2},
	}
	for _, st := range steps {
		got := post(st.body)
		if got.Status != st.status || got.Replayed() != st.replayed || site.Executions("order.paid") != st.execs {
			t.Fatalf("%s: status %d replayed %v executions %d; want %d %v %d (%s)", st.name,
				got.Status, got.Replayed(), site.Executions("order.paid"), st.status, st.replayed, st.execs, got.Body)
		}
	}
	if _, err := get(t, store, "s", "order.paid:42"); err != nil {
		t.Fatalf("composite key record: %v", err)
	}
}

func TestDuplicateStatusAnswer(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "queued as job 7")
	})
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: s
    match: { path: /hook }
    key: [ { body: id } ]
    duplicate: "200"
`)
	first := proxytest.Post(t, px.URL+"/hook", `{"id":"d1"}`)
	again := proxytest.Post(t, px.URL+"/hook", `{"id":"d1"}`)
	if first.Status != http.StatusAccepted || string(first.Body) != "queued as job 7" {
		t.Fatalf("first: %d %q", first.Status, first.Body)
	}
	if again.Status != 200 || len(again.Body) != 0 || !again.Replayed() {
		t.Fatalf("duplicate: %d %q replayed=%v; want 200, empty, replayed", again.Status, again.Body, again.Replayed())
	}
	if n := site.Executions("d1"); n != 1 {
		t.Fatalf("executions = %d, want 1", n)
	}
}

func TestFormKeyedSender(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: s
    match: { path: /pay/result.php }
    key: [ { form: InvId } ]
`)
	post := func(body string) proxytest.Reply {
		// X-Event-Id only tells the counting site which invoice it is.
		inv := body[strings.Index(body, "InvId=")+6:]
		inv, _, _ = strings.Cut(inv, "&")
		return proxytest.Post(t, px.URL+"/pay/result.php", body,
			"Content-Type", "application/x-www-form-urlencoded", "X-Event-Id", "inv-"+inv)
	}
	steps := []struct {
		body   string
		status int
		inv    string
		execs  int
	}{
		{"OutSum=100.00&InvId=77&SignatureValue=abc", 200, "inv-77", 1},
		{"OutSum=100.00&InvId=77&SignatureValue=abc", 200, "inv-77", 1},
		{"OutSum=900.00&InvId=77&SignatureValue=abc", 422, "inv-77", 1},
		{"InvId=78&OutSum=5.00", 200, "inv-78", 1},
	}
	for i, st := range steps {
		if got := post(st.body); got.Status != st.status || site.Executions(st.inv) != st.execs {
			t.Fatalf("step %d: status %d executions %d; want %d %d", i, got.Status, site.Executions(st.inv), st.status, st.execs)
		}
	}
	if _, err := get(t, store, "s", "77"); err != nil {
		t.Fatalf("record keyed by the form field: %v", err)
	}
	if got := proxytest.Post(t, px.URL+"/pay/result.php", `{"InvId":79}`); got.Status != http.StatusBadRequest {
		t.Fatalf("JSON body for a form sender: %d, want 400", got.Status)
	}
}

func TestShadowModeObservesOnly(t *testing.T) {
	t.Setenv("CT_SECRET", "gh-current")
	store := newStore(t)
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: s
    preset: github
    mode: shadow
    match: { path: /hooks/github }
    signature: { secret_env: CT_SECRET }
`)
	gh := ctPresets[1]
	for range 2 {
		if got := gh.deliver(t, px.URL, "gh-current", 0, "sh1", 5, false); got.Status != 200 || got.Replayed() {
			t.Fatalf("shadow delivery: %d replayed=%v", got.Status, got.Replayed())
		}
	}
	if got := gh.deliver(t, px.URL, "gh-current", 0, "sh1", 7, false); got.Status != 200 {
		t.Fatalf("shadow changed payload: %d", got.Status)
	}
	if got := gh.deliver(t, px.URL, "forged", 0, "sh2", 5, false); got.Status != 200 {
		t.Fatalf("shadow bad signature: %d", got.Status)
	}
	if n := site.Executions("sh1"); n != 3 {
		t.Fatalf("site executions = %d, want 3: shadow mode never refuses", n)
	}
	if n := site.Executions("sh2"); n != 1 {
		t.Fatalf("site executions of the forged one = %d, want 1", n)
	}
	for outcome, want := range map[string]float64{
		"processed": 1, "would_duplicate": 1, "would_conflict": 1, "would_rejected_signature": 1, "duplicate": 0,
	} {
		if got := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "s", "outcome", outcome); got != want {
			t.Errorf("hookonce_requests_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	if !strings.Contains(px.Logs.String(), `"outcome":"would_duplicate"`) {
		t.Errorf("no would_duplicate in the log:\n%s", px.Logs.String())
	}
	if rec, err := get(t, store, "s", gh.key("sh1")); err != nil || rec.State != dedupe.StateDone {
		t.Fatalf("shadow still records: %+v, %v", rec, err)
	}
	ctNoRecord(t, store, gh.key("sh2"))
}

func TestInProgressRejectWithSignature(t *testing.T) {
	t.Setenv("CT_SECRET", "gh-current")
	store := newStore(t)
	release := make(chan struct{})
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "ok")
	})
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: s
    preset: github
    match: { path: /hooks/github }
    signature: { secret_env: CT_SECRET }
    in_progress: reject
`)
	gh := ctPresets[1]
	done := make(chan proxytest.Reply)
	go func() { done <- gh.deliver(t, px.URL, "gh-current", 0, "held", 1, false) }()
	deadline := time.Now().Add(5 * time.Second)
	for site.Executions("held") == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	second := gh.deliver(t, px.URL, "gh-current", 0, "held", 1, false)
	close(release)
	first := <-done
	if second.Status != http.StatusConflict || second.Header.Get("Retry-After") == "" {
		t.Fatalf("while held: %d Retry-After=%q, want 409 with Retry-After", second.Status, second.Header.Get("Retry-After"))
	}
	if first.Status != 200 || site.Executions("held") != 1 {
		t.Fatalf("first: %d, executions %d", first.Status, site.Executions("held"))
	}
	if again := gh.deliver(t, px.URL, "gh-current", 0, "held", 1, false); again.Status != 200 || !again.Replayed() {
		t.Fatalf("after it finished: %d replayed=%v", again.Status, again.Replayed())
	}
}

func TestAmbiguousHoldUntilReleased(t *testing.T) {
	store := newStore(t)
	var calls atomic.Int64
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			time.Sleep(700 * time.Millisecond) // past upstream_timeout: did it run?
		}
		io.WriteString(w, "ok")
	})
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: s
    match: { path: /hook }
    key: [ { body: id } ]
    upstream_timeout: 200ms
    ambiguous: hold
`)
	if got := proxytest.Post(t, px.URL+"/hook", `{"id":"amb"}`); got.Status != http.StatusGatewayTimeout {
		t.Fatalf("timed out forward: %d, want 504", got.Status)
	}
	for i := range 2 {
		got := proxytest.Post(t, px.URL+"/hook", `{"id":"amb"}`)
		if got.Status != http.StatusConflict || got.Header.Get("Retry-After") == "" {
			t.Fatalf("retry %d of a held claim: %d Retry-After=%q", i, got.Status, got.Header.Get("Retry-After"))
		}
	}
	rec, err := get(t, store, "s", "amb")
	if err != nil || rec.State != dedupe.StateUnknown {
		t.Fatalf("held record = %+v, %v; want state unknown", rec, err)
	}
	if n := site.Executions("amb"); n != 1 {
		t.Fatalf("executions while held = %d, want 1", n)
	}
	// The operator's release (hookonce release / DELETE /v1/events/…).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := store.Forget(ctx, "s", "amb"); err != nil {
		t.Fatal(err)
	}
	if got := proxytest.Post(t, px.URL+"/hook", `{"id":"amb"}`); got.Status != 200 || site.Executions("amb") != 2 {
		t.Fatalf("after release: %d, executions %d", got.Status, site.Executions("amb"))
	}
}

// An address allowlist beside a signature: a delivery must come from a
// listed address and be signed; either failing is 401 and no execution.
func TestAllowlistAndSignatureTogether(t *testing.T) {
	t.Setenv("CT_SECRET", "gh-current")
	site := proxytest.NewSite(t, nil)
	conf := func(allow string) string {
		return `
senders:
  - name: gh
    preset: github
    match: { path: /hooks/gh }
    signature: { secret_env: CT_SECRET, allow: [` + allow + `] }
`
	}
	good := func(body string) []string {
		return []string{"X-Hub-Signature-256", "sha256=" + hex.EncodeToString(ctMAC([]byte("gh-current"), body))}
	}
	post := func(px *proxytest.Instance, id, body string, sig []string) int {
		req, _ := http.NewRequest("POST", px.URL+"/hooks/gh", strings.NewReader(body))
		req.Header.Set("X-GitHub-Delivery", id)
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-Event-Id", id) // what the test site counts by
		if sig != nil {
			req.Header.Set(sig[0], sig[1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// The test's requests come from 127.0.0.1.
	in := proxytest.Start(t, newStore(t), site.URL, conf("127.0.0.0/8"))
	if got := post(in, "a1", `{"n":1}`, good(`{"n":1}`)); got != 200 || site.Executions("a1") != 1 {
		t.Fatalf("listed and signed: %d, executions %d", got, site.Executions("a1"))
	}
	if got := post(in, "a2", `{"n":2}`, good(`{"n":3}`)); got != http.StatusUnauthorized || site.Executions("a2") != 0 {
		t.Fatalf("listed, bad signature: %d, executions %d", got, site.Executions("a2"))
	}
	out := proxytest.Start(t, newStore(t), site.URL, conf("10.0.0.0/8, '2001:db8::/32'"))
	if got := post(out, "b1", `{"n":1}`, good(`{"n":1}`)); got != http.StatusUnauthorized || site.Executions("b1") != 0 {
		t.Fatalf("signed from an unlisted address: %d, executions %d", got, site.Executions("b1"))
	}
	if !strings.Contains(out.Logs.String(), "not in the allowlist") {
		t.Fatalf("the refusal does not say why:\n%s", out.Logs.String())
	}
}
