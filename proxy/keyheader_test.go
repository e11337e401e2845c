package proxy_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/proxy/proxytest"
)

// TestClientKeyHeaderNeverReachesSite: the site trusts the forward key
// header to come from hookonce, so a client's own (under the configured
// name, in any spelling CGI folds to it) never reaches the site on a
// forward of a sender's path: a claimed forward carries hookonce's key;
// shadow mode and on_store_error: forward carry hookonce's too; a forward
// without a key (dedupe: off, missing_key: pass, unmatched on a path with
// senders, a method none accepts there) carries none. A path no sender
// names is streamed untouched (the documented choice). Counted at the
// site, whose recorded headers are checked.
func TestClientKeyHeaderNeverReachesSite(t *testing.T) {
	const cfg = `
senders:
  - name: shop
    match: { path: /shop }
    key: [ { body: id } ]
  - name: watch
    mode: shadow
    match: { path: /watch }
    key: [ { body: id } ]
  - name: off
    match: { path: /off }
    dedupe: off
  - name: loose
    match: { path: /loose }
    key: [ { body: id } ]
    missing_key: pass
  - name: picky
    match: { path: /picky, when: [ { body: kind, equals: pay } ] }
    key: [ { body: id } ]
  - name: custom
    match: { path: /custom }
    key: [ { body: id } ]
    forward_key_header: X-Hook-Key
`
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, newStore(t), site.URL, cfg)
	forged := []string{"Idempotency-Key", "forged", "Idempotency_Key", "forged-too", "X-Hook-Key", "forged", "X_Hook_Key", "forged"}
	for _, c := range []struct {
		name, path, id, body string
		header               string // the header the site must get, or none
		want                 string // its value; "" when none may arrive
	}{
		{"claimed", "/shop", "k-claimed", `{"id":"k-claimed"}`, "Idempotency-Key", "shop:k-claimed"},
		{"shadow", "/watch", "k-shadow", `{"id":"k-shadow"}`, "Idempotency-Key", "watch:k-shadow"},
		{"dedupe off", "/off", "k-off", `{"id":"k-off"}`, "Idempotency-Key", ""},
		{"missing_key: pass", "/loose", "k-loose", `{"other":1}`, "Idempotency-Key", ""},
		{"unmatched, forwarded", "/picky", "k-unmatched", `{"kind":"refund"}`, "Idempotency-Key", ""},
		{"custom header, claimed", "/custom", "k-custom", `{"id":"k-custom"}`, "X-Hook-Key", "custom:k-custom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := proxytest.Post(t, px.URL+c.path, c.body, append([]string{"X-Event-Id", c.id}, forged...)...)
			if r.Status != http.StatusOK {
				t.Fatalf("status %d %s", r.Status, r.Body)
			}
			if n := site.Executions(c.id); n != 1 {
				t.Fatalf("site ran %d times, want 1", n)
			}
			h := site.LastHeader(c.id)
			if got := h.Values(c.header); c.want == "" && len(got) != 0 || c.want != "" && (len(got) != 1 || got[0] != c.want) {
				t.Fatalf("site got %s %q, want %q", c.header, got, c.want)
			}
			for name := range h {
				if cgi := cgiName(name); cgi == cgiName(c.header) && name != http.CanonicalHeaderKey(c.header) {
					t.Fatalf("site got %s (%q) beside %s", name, h[name], c.header)
				}
			}
		})
	}
	t.Run("path no sender names: untouched", func(t *testing.T) {
		r := proxytest.Post(t, px.URL+"/api/orders", `{}`, "X-Event-Id", "k-api", "Idempotency-Key", "client-own")
		if r.Status != http.StatusOK || site.Executions("k-api") != 1 {
			t.Fatalf("status %d, runs %d", r.Status, site.Executions("k-api"))
		}
		if got := site.LastHeader("k-api").Get("Idempotency-Key"); got != "client-own" {
			t.Fatalf("a path no sender names: Idempotency-Key %q, want the client's own untouched", got)
		}
	})
}

// TestClientKeyHeaderStoreDown: on_store_error: forward sends the
// delivery on with hookonce's key, not the client's.
func TestClientKeyHeaderStoreDown(t *testing.T) {
	site := proxytest.NewSite(t, nil)
	store := newStore(t)
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: open
    match: { path: /open }
    key: [ { body: id } ]
    on_store_error: forward
`)
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	r := proxytest.Post(t, px.URL+"/open", `{"id":"k-down"}`, "Idempotency-Key", "forged")
	if r.Status != http.StatusOK || site.Executions("k-down") != 1 {
		t.Fatalf("status %d, runs %d; want the delivery forwarded once", r.Status, site.Executions("k-down"))
	}
	if got := site.LastHeader("k-down").Values("Idempotency-Key"); len(got) != 1 || got[0] != "open:k-down" {
		t.Fatalf("Idempotency-Key at the site = %q, want hookonce's open:k-down", got)
	}
}

// cgiName is a header name as CGI names its variable (without HTTP_):
// the spellings a PHP site cannot tell apart.
func cgiName(name string) string { return strings.ToUpper(strings.ReplaceAll(name, "-", "_")) }
