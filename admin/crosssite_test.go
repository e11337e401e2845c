package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe"
)

// send makes one request with the given headers ("Host" sets the Host
// header) and answers what came back; redirects are not followed.
func send(t *testing.T, method, target string, hdr map[string]string, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b}
}

// problemDetail is the detail of a problem+json answer ("" if it is not one).
func problemDetail(r reply) string {
	var p struct{ Detail string }
	if r.header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(r.body, &p) != nil {
		return ""
	}
	return p.Detail
}

// formPost is what another site's auto-submitting <form method=post>
// sends: a form body, the attacker's Origin, Sec-Fetch-Site cross-site.
func formPost(origin string) map[string]string {
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	if origin != "" {
		h["Origin"], h["Sec-Fetch-Site"] = origin, "cross-site"
	}
	return h
}

// Without a token, a write another site's page could make the operator's
// browser send is refused before it runs anything: a redelivery runs the
// site's handler 0 more times, a release and a delete leave the record as
// it was. A same-origin JSON POST (what a script on the page or a curl
// sends) and a bare JSON POST (the CLI) still work.
func TestNoTokenRefusesCrossSiteWrites(t *testing.T) {
	adm, site, store, up := lostEventWith(t, "")
	up.Store(true)
	ctx := context.Background()
	jsonPost := map[string]string{"Content-Type": "application/json"}
	// The CLI's way (no Origin, the JSON content type): the event is done,
	// the handler ran twice (the failed run and this one).
	if r := send(t, "POST", adm.URL+"/v1/redeliver/shop/lost-7", jsonPost, ""); r.status != 200 || site.Executions("lost-7") != 2 {
		t.Fatalf("JSON redeliver: %d %s, runs %d", r.status, r.body, site.Executions("lost-7"))
	}
	held(t, store, "amb-9")

	attacks := []struct {
		name    string
		hdr     map[string]string
		body    string
		status  int
		mention string // the refusal names the rule
	}{
		{"cross-origin form", formPost("http://evil.example"), "x=1", 403, "Sec-Fetch-Site: cross-site"},
		{"cross-origin form, no Sec-Fetch-Site", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example"}, "x=1", 403, `Origin "http://evil.example"`},
		{"form from an old browser (no Origin, no Sec-Fetch-Site)", formPost(""), "x=1", 403, "Content-Type: application/json"},
		{"text/plain beacon from a sandboxed frame", map[string]string{"Content-Type": "text/plain", "Origin": "null"}, "{}", 403, "Origin: null"},
		{"no content type at all", map[string]string{}, "", 403, "Content-Type: application/json"},
		{"JSON, but from another origin", map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}, "", 403, "evil.example"},
		{"JSON, but Sec-Fetch-Site cross-site", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, "", 403, "cross-site"},
		{"JSON, from a sibling site", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:1"}, "", 403, "same-site"},
		{"JSON, a rebound name", map[string]string{"Content-Type": "application/json", "Host": "evil.example:9090", "Origin": "http://evil.example:9090"}, "", 421, "loopback"},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			for _, target := range []string{
				"POST /v1/redeliver/shop/lost-7?force=true",
				"POST /v1/release/shop/amb-9",
				"POST /v1/release/shop/lost-7",
				"DELETE /v1/events/shop/lost-7",
			} {
				method, path, _ := strings.Cut(target, " ")
				r := send(t, method, adm.URL+path, a.hdr, a.body)
				if r.status != a.status || !strings.Contains(problemDetail(r), a.mention) {
					t.Errorf("%s: %d %s, want %d naming %q", target, r.status, r.body, a.status, a.mention)
				}
			}
			if n := site.Executions("lost-7"); n != 2 {
				t.Fatalf("a refused redelivery ran the handler: %d runs, want 2", n)
			}
			if rec, err := store.Get(ctx, "shop", "lost-7"); err != nil || rec.State != dedupe.StateDone {
				t.Fatalf("a refused release or delete changed the done record: %+v %v", rec, err)
			}
			if rec, err := store.Get(ctx, "shop", "amb-9"); err != nil || rec.State != dedupe.StateUnknown {
				t.Fatalf("a refused release changed the held record: %+v %v", rec, err)
			}
		})
	}

	// The page's own origin, as a browser sends it from the listener's page.
	u, _ := url.Parse(adm.URL)
	same := map[string]string{"Content-Type": "application/json; charset=utf-8", "Origin": adm.URL, "Sec-Fetch-Site": "same-origin"}
	if r := send(t, "POST", adm.URL+"/v1/release/shop/amb-9", same, ""); r.status != 200 {
		t.Fatalf("same-origin JSON release: %d %s", r.status, r.body)
	}
	mustReleased(t, store, "amb-9")
	if r := send(t, "POST", adm.URL+"/v1/redeliver/shop/lost-7?force=true", same, ""); r.status != 200 || site.Executions("lost-7") != 3 {
		t.Fatalf("same-origin JSON forced redeliver: %d %s, runs %d", r.status, r.body, site.Executions("lost-7"))
	}
	// Through ssh -L the port differs and the name is localhost.
	tunnel := map[string]string{"Content-Type": "application/json", "Host": "localhost:19090", "Origin": "http://localhost:19090", "Sec-Fetch-Site": "same-origin"}
	if r := send(t, "DELETE", adm.URL+"/v1/events/shop/amb-9", tunnel, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE through a tunnel (Host %s → %s): %d %s", "localhost:19090", u.Host, r.status, r.body)
	}
}

// Without a token, every request must name loopback (or the listen
// address) in Host, reads included: a DNS-rebinding page, whose requests
// name its own host, reads nothing.
func TestNoTokenRefusesForeignHost(t *testing.T) {
	store := openStore(t)
	seed(t, store, "shop", "evt-1", 200, []byte(`{"secret":"answer"}`))
	h, err := admin.New(admin.Options{Store: store, ListenAddr: "hookonce.internal:9090", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	paths := []string{"/v1/events/shop/evt-1", "/v1/events", "/v1/conflicts", "/ui/events", "/ui/events/shop/evt-1", "/metrics", "/readyz", "/healthz"}
	for _, host := range []string{"evil.example:9090", "evil.example", "127.0.0.1.evil.example:9090", "localhost.evil.example", "10.0.0.5:9090", "[2001:db8::1]:9090", "0.0.0.0:9090"} {
		for _, p := range paths {
			r := send(t, "GET", srv.URL+p, map[string]string{"Host": host}, "")
			if r.status != http.StatusMisdirectedRequest || !strings.Contains(problemDetail(r), "loopback") || strings.Contains(string(r.body), "secret") {
				t.Errorf("GET %s with Host %s: %d %s, want 421 naming the loopback rule", p, host, r.status, r.body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:9090", "127.0.0.2", "localhost:8080", "LocalHost", "localhost.", "[::1]:9090", "[::ffff:127.0.0.1]:1", "hookonce.internal:9090", "hookonce.internal:1234"} {
		r := send(t, "GET", srv.URL+"/v1/events/shop/evt-1", map[string]string{"Host": host}, "")
		if r.status != http.StatusOK || !strings.Contains(string(r.body), "evt-1") {
			t.Errorf("GET with Host %s: %d %s, want 200", host, r.status, r.body)
		}
	}
}

// The page's own forms work without a token (they carry the CSRF token;
// the browser sends the page's origin), and a form from another origin is
// refused even with a stolen CSRF token.
func TestNoTokenPageForms(t *testing.T) {
	f := newFixture(t, "")
	held(t, f.store, "amb-3")
	held(t, f.store, "amb-4")
	page := send(t, "GET", f.srv.URL+"/ui/events/shop/amb-3", nil, "")
	if page.status != 200 || page.header.Get("Referrer-Policy") != "same-origin" {
		t.Fatalf("event page: %d, Referrer-Policy %q", page.status, page.header.Get("Referrer-Policy"))
	}
	s := string(page.body)
	i := strings.Index(s, `name="csrf" value="`)
	if i < 0 {
		t.Fatalf("no csrf field:\n%s", s)
	}
	csrf := s[i+len(`name="csrf" value="`):]
	csrf = csrf[:strings.IndexByte(csrf, '"')]
	form := url.Values{"csrf": {csrf}}.Encode()

	evil := formPost("http://evil.example")
	if r := send(t, "POST", f.srv.URL+"/ui/release/shop/amb-3", evil, form); r.status != 403 {
		t.Fatalf("cross-origin form with the CSRF token: %d %s", r.status, r.body)
	}
	if rec, _ := f.store.Get(context.Background(), "shop", "amb-3"); rec.State != dedupe.StateUnknown {
		t.Fatalf("a refused release changed the record: %s", rec.State)
	}
	own := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": f.srv.URL, "Sec-Fetch-Site": "same-origin"}
	if r := send(t, "POST", f.srv.URL+"/ui/release/shop/amb-3", own, form); r.status != http.StatusSeeOther {
		t.Fatalf("the page's own release form: %d %s", r.status, r.body)
	}
	mustReleased(t, f.store, "amb-3")
	// A browser under a no-referrer policy sends Origin: null on its own
	// form; Sec-Fetch-Site vouches for it.
	own["Origin"] = "null"
	if r := send(t, "POST", f.srv.URL+"/ui/release/shop/amb-4", own, form); r.status != http.StatusSeeOther {
		t.Fatalf("the page's own form with Origin null, Sec-Fetch-Site same-origin: %d %s", r.status, r.body)
	}
	mustReleased(t, f.store, "amb-4")
}

// With a token the rules above do not apply (the bearer header is what a
// browser cannot send across sites): a request with the token is served
// whatever its Host, Origin or content type, and one without is 401.
func TestTokenSkipsOriginRules(t *testing.T) {
	adm, site, store, up := lostEvent(t)
	up.Store(true)
	evil := formPost("http://evil.example")
	evil["Host"] = "evil.example:9090"
	if r := send(t, "POST", adm.URL+"/v1/redeliver/shop/lost-7", evil, "x=1"); r.status != http.StatusUnauthorized || site.Executions("lost-7") != 1 {
		t.Fatalf("without the token: %d, runs %d", r.status, site.Executions("lost-7"))
	}
	evil["Authorization"] = "Bearer " + testToken
	if r := send(t, "POST", adm.URL+"/v1/redeliver/shop/lost-7", evil, "x=1"); r.status != 200 || site.Executions("lost-7") != 2 {
		t.Fatalf("with the token: %d %s, runs %d", r.status, r.body, site.Executions("lost-7"))
	}
	if r := send(t, "GET", adm.URL+"/v1/events/shop/lost-7", map[string]string{"Host": "admin.example.com", "Authorization": "Bearer " + testToken}, ""); r.status != 200 {
		t.Fatalf("GET with the token and another Host: %d", r.status)
	}
	if rec, err := store.Get(context.Background(), "shop", "lost-7"); err != nil || rec.State != dedupe.StateDone {
		t.Fatalf("record: %+v %v", rec, err)
	}
}
