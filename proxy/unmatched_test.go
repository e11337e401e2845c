package proxy_test

import (
	"net/http"
	"testing"

	"github.com/hookonce/hookonce/proxy/proxytest"
)

// When the default is pass and when it is reject, counted at the site:
// a path whose senders all have match.when hands on what none takes; a
// path with a sender without when (alone or beside others) refuses it; a
// method no sender accepts gets 405 either way; a path whose senders are
// all in shadow mode forwards everything, as if hookonce were absent.
func TestUnmatchedDefaultAndShadow(t *testing.T) {
	const cfg = `
senders:
  - name: shared
    match: { path: /shared.php, when: [ { form: kind, equals: pay } ] }
    key: [ { form: id } ]
  - name: alone
    match: { path: /alone.php }
    key: [ { form: id } ]
  - name: mixed-when
    match: { path: /mixed.php, when: [ { form: kind, equals: pay } ] }
    key: [ { form: id } ]
  - name: mixed-all
    match: { path: /mixed.php, method: GET }
    key: [ { query: id } ]
  - name: watch-a
    mode: shadow
    match: { path: /watched.php, when: [ { form: kind, equals: a } ] }
    key: [ { form: id } ]
  - name: watch-b
    mode: shadow
    match: { path: /watched.php, when: [ { form: kind, equals: b } ] }
    key: [ { form: id } ]
`
	store := newStore(t)
	site := newKeySite(t)
	px := proxytest.Start(t, store, site.URL, cfg)
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	for _, c := range []struct {
		name, method, path, body string
		status                   int // 200: the site's answer
		reached                  bool
		action                   string
	}{
		{"all senders have when: the site decides", "POST", "/shared.php", "kind=other&id=1", 200, true, "forwarded"},
		{"all senders have when, a method none accepts", "PUT", "/shared.php", "kind=other&id=1", 405, false, "refused"},
		{"one sender without when", "POST", "/alone.php", "x=1", 400, false, ""}, // its own: no event id
		{"one sender without when, a method it does not accept", "GET", "/alone.php", "", 405, false, "refused"},
		{"a sender without when beside one with", "POST", "/mixed.php", "kind=other&id=1", 403, false, "refused"},
		{"shadow: unmatched", "POST", "/watched.php", "kind=c&id=1", 200, true, "forwarded"},
		{"shadow: a method none accepts", "DELETE", "/watched.php", "", 200, true, "forwarded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := site.calls()
			var forwarded, refused float64
			if c.action != "" {
				path := c.path
				forwarded = proxytest.Metric(t, px.Registry, "hookonce_unmatched_total", "path", path, "action", "forwarded")
				refused = proxytest.Metric(t, px.Registry, "hookonce_unmatched_total", "path", path, "action", "refused")
			}
			r := send(t, px.Server, c.method, c.path, c.body, form...)
			if r.StatusCode != c.status {
				t.Errorf("status %d, want %d", r.StatusCode, c.status)
			}
			if got := site.calls() - before; got != map[bool]int{true: 1, false: 0}[c.reached] {
				t.Errorf("the site ran %d times, want reached=%v", got, c.reached)
			}
			if c.reached && site.header().Get("Idempotency-Key") != "" {
				t.Error("forwarded with an Idempotency-Key")
			}
			if c.action != "" {
				f := proxytest.Metric(t, px.Registry, "hookonce_unmatched_total", "path", c.path, "action", "forwarded") - forwarded
				rf := proxytest.Metric(t, px.Registry, "hookonce_unmatched_total", "path", c.path, "action", "refused") - refused
				if (c.action == "forwarded") != (f == 1) || (c.action == "refused") != (rf == 1) {
					t.Errorf("hookonce_unmatched_total moved forwarded +%v refused +%v, want %s", f, rf, c.action)
				}
			}
		})
	}
	if r := send(t, px.Server, "POST", "/shared.php", "kind=pay&id=9", form...); r.StatusCode != http.StatusOK || site.count("shared:9") != 1 {
		t.Fatalf("the shared path's own sender: %d, ran %d", r.StatusCode, site.count("shared:9"))
	}
}
