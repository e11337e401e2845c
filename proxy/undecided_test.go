package proxy_test

import (
	"io"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/proxy/proxytest"
)

// A request whose match.when value cannot be read as the site reads it
// is refused with 400 problem+json naming the reason, counted as
// bad_request and logged, and never reaches the site, on a path whose
// unmatched default would forward what no sender takes; in shadow mode it
// is forwarded (logged), as shadow forwards every refusal.
func TestUndecidedRequestIsRefused(t *testing.T) {
	const cfg = `
senders:
  - name: pay
    match: { path: /kind.php, when: [ { header: X-Kind, equals: pay } ] }
    key: [ { form: id } ]
  - name: watch
    mode: shadow
    match: { path: /watched.php, when: [ { header: X-Kind, equals: pay } ] }
    key: [ { form: id } ]
`
	store := newStore(t)
	site := newKeySite(t)
	px := proxytest.Start(t, store, site.URL, cfg)
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}

	before := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "pay", "outcome", "bad_request")
	for _, h := range [][]string{{"X-Kind", "pay", "X-Kind", "pay"}, {"X-Kind", "other", "X_Kind", "pay"}} {
		raw := "POST /kind.php HTTP/1.1\r\nHost: shop.example\r\nConnection: close\r\nContent-Length: 4\r\n" +
			"Content-Type: application/x-www-form-urlencoded\r\n" + h[0] + ": " + h[1] + "\r\n" + h[2] + ": " + h[3] + "\r\n\r\nid=1"
		r := rawRequest(t, strings.TrimPrefix(px.URL, "http://"), raw)
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 400 || r.Header.Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(string(b), "header X-Kind") || !strings.Contains(string(b), "sent more than once") {
			t.Errorf("%v: %d %s %s; want 400 problem+json naming the header and why", h, r.StatusCode, r.Header.Get("Content-Type"), b)
		}
	}
	if n := site.calls(); n != 0 {
		t.Fatalf("the site ran %d times", n)
	}
	if got := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "pay", "outcome", "bad_request") - before; got != 2 {
		t.Errorf("hookonce_requests_total{pay,bad_request} moved %v, want 2", got)
	}
	if !strings.Contains(px.Logs.String(), "cannot be read as the site reads it") || !strings.Contains(px.Logs.String(), `"tried":"pay: header X-Kind equals \"pay\" could not be read`) {
		t.Errorf("the log does not name the reason:\n%s", px.Logs.String())
	}
	// What is absent stays absent: no X-Kind at all is no sender's, forwarded.
	if r := send(t, px.Server, "POST", "/kind.php", "id=2", form...); r.StatusCode != 200 || site.calls() != 1 {
		t.Errorf("no X-Kind: %d, %d site calls; want forwarded", r.StatusCode, site.calls())
	}
	// Shadow mode forwards it.
	if r := send(t, px.Server, "POST", "/watched.php", "id=3", append(form, "X-Kind", "pay", "X-Kind", "pay")...); r.StatusCode != 200 || site.calls() != 2 {
		t.Errorf("shadow: %d, %d site calls; want forwarded", r.StatusCode, site.calls())
	}
}

// An event id that is there but cannot be read as the site reads it is
// not a missing one: missing_key: pass does not forward a copy whose id
// header came twice (it would run without dedupe); a delivery without the
// id still goes on.
func TestUnreadableKeyIsNotMissing(t *testing.T) {
	const cfg = `
senders:
  - name: shop
    match: { path: /hook.php }
    key: [ { header: X-Event-Id } ]
    missing_key: pass
`
	store := newStore(t)
	site := newKeySite(t)
	px := proxytest.Start(t, store, site.URL, cfg)
	raw := "POST /hook.php HTTP/1.1\r\nHost: shop.example\r\nConnection: close\r\nContent-Length: 2\r\n" +
		"X-Event-Id: e1\r\nX_Event_Id: e2\r\n\r\n{}"
	r := rawRequest(t, strings.TrimPrefix(px.URL, "http://"), raw)
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 400 || !strings.Contains(string(b), "more than once") || site.calls() != 0 {
		t.Fatalf("id header twice: %d %s, %d site calls; want 400 and none", r.StatusCode, b, site.calls())
	}
	if r := send(t, px.Server, "POST", "/hook.php", "{}"); r.StatusCode != 200 || site.calls() != 1 {
		t.Fatalf("no id, missing_key: pass: %d, %d site calls; want forwarded", r.StatusCode, site.calls())
	}
}
