package proxy_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// keySite is a site that counts executions per forwarded Idempotency-Key
// (sender:key), whatever the body's format, and remembers the headers it
// was given.
type keySite struct {
	*httptest.Server
	mu    sync.Mutex
	execs map[string]int
	total int
	last  http.Header
}

func newKeySite(t *testing.T) *keySite {
	t.Helper()
	s := &keySite{execs: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.execs[r.Header.Get("Idempotency-Key")]++
		s.total++
		s.last = r.Header.Clone()
		s.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *keySite) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.execs[key]
}

func (s *keySite) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

func (s *keySite) header() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// send writes one raw HTTP/1.1 request, so the path goes over the wire
// exactly as written (no client cleans it).
func send(t *testing.T, px *httptest.Server, method, target, body string, header ...string) *http.Response {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: shop.example\r\nConnection: close\r\nContent-Length: %d\r\n", method, target, len(body))
	for i := 0; i+1 < len(header); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", header[i], header[i+1])
	}
	b.WriteString("\r\n" + body)
	resp := rawRequest(t, strings.TrimPrefix(px.URL, "http://"), b.String())
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func stripeSig(secret, body string, ts int64) string {
	t := strconv.FormatInt(ts, 10)
	return "t=" + t + ",v1=" + hex.EncodeToString(ctMAC([]byte(secret), t, ".", body))
}

// variants of one script path that PHP behind nginx (or Apache) runs as
// that script: the reproductions of trap 19.
func variants(path string) []string {
	dir, file := path[:strings.LastIndexByte(path, '/')], path[strings.LastIndexByte(path, '/')+1:]
	return []string{
		path,
		"/" + path,
		dir + "/./" + file,
		dir + "//" + file,
		dir + "/x/../" + file,
		path + "/",
		path + "/anything",
		path + "/a/b.php",
		path[:len(dir)] + "%2F" + file, // the last slash escaped
		strings.Replace(path, "o", "%6F", 1),
		strings.Replace(path, ".php", "%2Ephp", 1),
		path + "?x=1",
	}
}

func TestPathVariantsAndMethodsGetTheSendersRules(t *testing.T) {
	t.Setenv("ROUTING_STRIPE_SECRET", "whsec_routing")
	store := newStore(t)
	site := newKeySite(t)
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: stripe
    preset: stripe
    match: { path: /bitrix/tools/stripe.php }
    signature: { secret_env: ROUTING_STRIPE_SECRET }
  - name: shop
    match: { path: /api/webhooks/x.php }
    key: [ { header: X-Event-Id } ]
`)
	now := time.Now().Unix()

	t.Run("one event on every variant runs once", func(t *testing.T) {
		before := site.calls()
		for _, v := range variants("/api/webhooks/x.php") {
			resp := send(t, px.Server, "POST", v, `{"order":1}`, "X-Event-Id", "evt-variants", "Content-Type", "application/json")
			if resp.StatusCode != 200 {
				t.Errorf("POST %s: status %d, want 200 (first or replayed)", v, resp.StatusCode)
			}
		}
		// Counted whatever the site was given: a variant passed through
		// unchecked carries no key header, but it runs the script all the same.
		if n, all := site.count("shop:evt-variants"), site.calls()-before; n != 1 || all != 1 {
			t.Fatalf("one event on %d path variants ran %d times (%d under its key), want 1", len(variants("/api/webhooks/x.php")), all, n)
		}
	})

	t.Run("unsigned on every variant is refused", func(t *testing.T) {
		before := site.calls()
		for _, v := range variants("/bitrix/tools/stripe.php") {
			resp := send(t, px.Server, "POST", v, `{"id":"evt_unsigned"}`, "Content-Type", "application/json")
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("unsigned POST %s: status %d, want 401", v, resp.StatusCode)
			}
		}
		if got := site.calls() - before; got != 0 {
			t.Fatalf("unsigned deliveries reached the site %d times", got)
		}
	})

	t.Run("signed on every variant runs once", func(t *testing.T) {
		before := site.calls()
		body := `{"id":"evt_signed_variants"}`
		for _, v := range variants("/bitrix/tools/stripe.php") {
			send(t, px.Server, "POST", v, body, "Stripe-Signature", stripeSig("whsec_routing", body, now), "Content-Type", "application/json")
		}
		if n, all := site.count("stripe:evt_signed_variants"), site.calls()-before; n != 1 || all != 1 {
			t.Fatalf("signed event ran %d times (%d under its key), want 1", all, n)
		}
	})

	t.Run("other methods never reach the script", func(t *testing.T) {
		before := site.calls()
		for _, m := range []string{"PUT", "PATCH", "GET", "DELETE", "OPTIONS"} {
			for _, v := range append(variants("/bitrix/tools/stripe.php"), variants("/api/webhooks/x.php")...) {
				resp := send(t, px.Server, m, v, `{"id":"evt_method"}`, "X-Event-Id", "evt-method")
				if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
					t.Errorf("%s %s: status %d Allow %q, want 405 Allow POST", m, v, resp.StatusCode, resp.Header.Get("Allow"))
				}
			}
		}
		if got := site.calls() - before; got != 0 {
			t.Fatalf("other methods reached the site %d times", got)
		}
	})

	t.Run("a path no site runs is refused", func(t *testing.T) {
		before := site.calls()
		for _, v := range []string{"/../bitrix/tools/stripe.php", "/bitrix/tools/stripe.php%00", "/bitrix/%zz/stripe.php"} {
			if resp := send(t, px.Server, "POST", v, `{}`); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("POST %s: status %d, want 400", v, resp.StatusCode)
			}
		}
		if site.calls() != before {
			t.Fatal("a malformed path reached the site")
		}
	})

	t.Run("other paths pass untouched", func(t *testing.T) {
		before := site.calls()
		for _, v := range []string{"/api/webhooks/y.php", "/bitrix/tools/stripe2.php", "/api/webhooks/x.phpx"} {
			if resp := send(t, px.Server, "GET", v, ""); resp.StatusCode != 200 {
				t.Errorf("GET %s: status %d, want the site's 200", v, resp.StatusCode)
			}
		}
		if got := site.calls() - before; got != 3 {
			t.Fatalf("pass-through calls = %d, want 3", got)
		}
	})
}

// Three payment systems on one Bitrix script, told apart by a form field,
// a JSON field and a query parameter; a fourth request matches none.
const sharedPathConfig = `
senders:
  - name: robokassa
    match:
      path: /bitrix/tools/sale_ps_result.php
      when: [ { form: SHP_HANDLER, equals: ROBOXCHANGE } ]
    key: [ { form: InvId } ]
  - name: yookassa
    match:
      path: /bitrix/tools/sale_ps_result.php
      when: [ { body: object.metadata.BX_HANDLER, equals: YANDEX_CHECKOUT } ]
    key: [ { body: object.id }, { body: event } ]
  - name: legacy
    match:
      path: /bitrix/tools/sale_ps_result.php
      method: GET,POST
      when: [ { query: action, equals: pay }, { header: X-Shop, present: true } ]
    key: [ { query: id } ]
`

func TestSendersSharingAPathToldApartByContent(t *testing.T) {
	// unmatched as written in paths: ("" for the default: pass, since
	// every sender on the path has match.when).
	for _, unmatched := range []string{"", "pass", "reject"} {
		t.Run("unmatched="+unmatched, func(t *testing.T) {
			cfg := sharedPathConfig
			if unmatched != "" {
				cfg += "paths:\n  /bitrix/tools/sale_ps_result.php: { unmatched: " + unmatched + " }\n"
			}
			store := newStore(t)
			site := newKeySite(t)
			px := proxytest.Start(t, store, site.URL, cfg)
			const path = "/bitrix/tools/sale_ps_result.php"
			form := []string{"Content-Type", "application/x-www-form-urlencoded"}
			js := []string{"Content-Type", "application/json"}
			for range 3 { // every delivery three times: one execution each
				send(t, px.Server, "POST", path, "InvId=77&OutSum=10.00&SHP_HANDLER=ROBOXCHANGE", form...)
				send(t, px.Server, "POST", "//bitrix/tools/./sale_ps_result.php",
					`{"event":"payment.succeeded","object":{"id":"p-1","metadata":{"BX_HANDLER":"YANDEX_CHECKOUT"}}}`, js...)
				send(t, px.Server, "POST", "/bitrix/tools/sale_ps_result.php/x",
					`{"event":"payment.waiting_for_capture","object":{"id":"p-1","metadata":{"BX_HANDLER":"YANDEX_CHECKOUT"}}}`, js...)
				send(t, px.Server, "GET", path+"?action=pay&id=L5", "", "X-Shop", "1")
			}
			for key, want := range map[string]int{
				"robokassa:77": 1, "yookassa:p-1:payment.succeeded": 1, "yookassa:p-1:payment.waiting_for_capture": 1, "legacy:L5": 1,
			} {
				if got := site.count(key); got != want {
					t.Errorf("%s ran %d times, want %d", key, got, want)
				}
			}
			before := site.calls()
			// Matches no sender: a form without the handler field, a GET
			// without the header, a JSON of another handler.
			r1 := send(t, px.Server, "POST", path, "InvId=78&OutSum=10.00", form...)
			r2 := send(t, px.Server, "GET", path+"?action=pay&id=L6", "")
			r3 := send(t, px.Server, "POST", path, `{"object":{"id":"p-2","metadata":{"BX_HANDLER":"OTHER"}}}`, js...)
			r4 := send(t, px.Server, "PUT", path, "InvId=79&SHP_HANDLER=ROBOXCHANGE", form...)
			metric := func(action string) float64 {
				return proxytest.Metric(t, px.Registry, "hookonce_unmatched_total", "path", path, "action", action)
			}
			if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "", "outcome", "unmatched"); n != 4 {
				t.Errorf("hookonce_requests_total{outcome=unmatched} = %v, want 4", n)
			}
			if unmatched != "reject" && site.header().Get("Idempotency-Key") != "" {
				t.Fatal("an unmatched request was forwarded with a key")
			}
			switch unmatched {
			case "pass": // every method too
				if got := site.calls() - before; got != 4 {
					t.Fatalf("unmatched: pass forwarded %d of 4", got)
				}
				if f, r := metric("forwarded"), metric("refused"); f != 4 || r != 0 {
					t.Errorf("hookonce_unmatched_total forwarded %v refused %v, want 4 and 0", f, r)
				}
			case "": // the site's own dispatch decides; a method no sender accepts is still refused
				if got := site.calls() - before; got != 3 {
					t.Fatalf("the default forwarded %d of the 3 with an accepted method", got)
				}
				for i, r := range []*http.Response{r1, r2, r3} {
					if r.StatusCode != http.StatusOK {
						t.Errorf("unmatched request %d: status %d, want the site's 200", i+1, r.StatusCode)
					}
				}
				if r4.StatusCode != http.StatusMethodNotAllowed || r4.Header.Get("Allow") != "GET, POST" {
					t.Errorf("PUT: status %d Allow %q, want 405 GET, POST", r4.StatusCode, r4.Header.Get("Allow"))
				}
				if f, r := metric("forwarded"), metric("refused"); f != 3 || r != 1 {
					t.Errorf("hookonce_unmatched_total forwarded %v refused %v, want 3 and 1", f, r)
				}
			case "reject":
				if got := site.calls() - before; got != 0 {
					t.Fatalf("%d unmatched requests reached the site", got)
				}
				for i, r := range []*http.Response{r1, r2, r3} {
					if r.StatusCode != http.StatusForbidden {
						t.Errorf("unmatched request %d: status %d, want 403", i+1, r.StatusCode)
					}
				}
				if r4.StatusCode != http.StatusMethodNotAllowed || r4.Header.Get("Allow") != "GET, POST" {
					t.Errorf("PUT: status %d Allow %q, want 405 GET, POST", r4.StatusCode, r4.Header.Get("Allow"))
				}
				if f, r := metric("forwarded"), metric("refused"); f != 0 || r != 4 {
					t.Errorf("hookonce_unmatched_total forwarded %v refused %v, want 0 and 4", f, r)
				}
			}
			if recs, _ := store.List(context.Background(), dedupe.ListFilter{}); len(recs) != 4 {
				t.Errorf("store holds %d records, want the 4 matched events", len(recs))
			}
		})
	}
}

// PHP reads the last of repeated JSON keys and form fields, and one number
// however it is spelled; hookonce reads the same id, so these deliveries
// are one event and run once (trap 20).
func TestIdsReadAsPHPReadsThem(t *testing.T) {
	store := newStore(t)
	site := newKeySite(t)
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: json
    match: { path: /j.php }
    key: [ { body: id } ]
  - name: form
    match: { path: /f.php }
    key: [ { form: id } ]
`)
	js := []string{"Content-Type", "application/json"}
	for _, body := range []string{`{"id":"dupA","id":"evt_B"}`, `{"id":"evt_B"}`, `{"id":"x","id":"evt_B"}`} {
		send(t, px.Server, "POST", "/j.php", body, js...)
	}
	for _, body := range []string{`{"id":1}`, `{"id":1.0}`, `{"id":1e0}`, `{"id":10E-1}`, `{"id":"1"}`} {
		send(t, px.Server, "POST", "/j.php", body, js...)
	}
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	for _, body := range []string{"id=fa&id=EVT9", "id=EVT9", "id=x&id=EVT9&amount=1"} {
		send(t, px.Server, "POST", "/f.php", body, form...)
	}
	for key, want := range map[string]int{"json:evt_B": 1, "json:dupA": 0, "json:1": 1, "form:EVT9": 1, "form:fa": 0} {
		if got := site.count(key); got != want {
			t.Errorf("%s ran %d times, want %d", key, got, want)
		}
	}
	if site.calls() != 3 {
		t.Errorf("site ran %d times for three events", site.calls())
	}
}

// Key parts are joined unambiguously: another tenant's event is its own
// (trap 22).
func TestCompositeKeysDoNotCollide(t *testing.T) {
	store := newStore(t)
	site := newKeySite(t)
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: tenant
    match: { path: /t }
    key: [ { header: X-Tenant }, { body: id } ]
`)
	r1 := send(t, px.Server, "POST", "/t", `{"id":"7"}`, "X-Tenant", "acme:evt", "Content-Type", "application/json")
	r2 := send(t, px.Server, "POST", "/t", `{"id":"evt:7"}`, "X-Tenant", "acme", "Content-Type", "application/json")
	if r1.StatusCode != 200 || r2.StatusCode != 200 || r2.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("statuses %d, %d (second replayed: %q)", r1.StatusCode, r2.StatusCode, r2.Header.Get("Idempotent-Replayed"))
	}
	if site.calls() != 2 || site.count(`tenant:acme\:evt:7`) != 1 || site.count(`tenant:acme:evt\:7`) != 1 {
		t.Fatalf("site calls %d, per key %v", site.calls(), site.execs)
	}
}

// An id no event should have is refused before the store sees it.
func TestUnusableKeysRefused(t *testing.T) {
	store := newStore(t)
	site := newKeySite(t)
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: shop
    match: { path: /s }
    key: [ { body: id } ]
    missing_key: pass
  - name: form
    match: { path: /f }
    key: [ { form: id } ]
    missing_key: pass
`)
	for _, body := range []string{`{"id":"a\u0000b"}`, `{"id":"a\nb"}`, `{"id":"` + strings.Repeat("x", 600) + `"}`} {
		if resp := send(t, px.Server, "POST", "/s", body, "Content-Type", "application/json"); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%.20q: status %d, want 400", body, resp.StatusCode)
		}
	}
	for _, body := range []string{"id=a%FFb", "id=a%00b", "id=a%0Db"} {
		if resp := send(t, px.Server, "POST", "/f", body, "Content-Type", "application/x-www-form-urlencoded"); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: status %d, want 400", body, resp.StatusCode)
		}
	}
	if site.calls() != 0 {
		t.Fatalf("site ran %d times", site.calls())
	}
	if recs, _ := store.List(context.Background(), dedupe.ListFilter{}); len(recs) != 0 {
		t.Fatalf("store holds %d records", len(recs))
	}
}

// The headers the site trusts are hookonce's to set: a sender cannot strip
// the forwarded key, nor claim another address.
func TestHeadersTheSiteTrusts(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		t.Run(fmt.Sprintf("trusted=%v", trusted), func(t *testing.T) {
			store := newStore(t)
			site := newKeySite(t)
			cfg := `
senders:
  - name: shop
    match: { path: /s }
    key: [ { header: X-Event-Id } ]
`
			if trusted {
				cfg += "trusted_proxies: [127.0.0.1]\n"
			}
			px := proxytest.Start(t, store, site.URL, cfg)
			conn := "close, Idempotency-Key, X-Real-IP"
			if trusted {
				conn = "close, Idempotency-Key" // the site's nginx names no such header
			}
			send(t, px.Server, "POST", "/s", "{}", "X-Event-Id", "e1", "Connection", conn,
				"X-Real-IP", "185.71.76.1", "True-Client-IP", "185.71.76.2", "X-Client-IP", "185.71.76.3")
			h := site.header()
			if site.count("shop:e1") != 1 {
				t.Fatalf("the site got the key header %q, want shop:e1", h.Get("Idempotency-Key"))
			}
			wantReal := "127.0.0.1"
			if trusted {
				wantReal = "185.71.76.1" // the site's own nginx set it
			}
			if got := h.Get("X-Real-Ip"); got != wantReal {
				t.Errorf("X-Real-IP = %q, want %q", got, wantReal)
			}
			if !trusted && (h.Get("True-Client-Ip") != "" || h.Get("X-Client-Ip") != "") {
				t.Errorf("client-sent address headers passed: %v", h)
			}
		})
	}
}
