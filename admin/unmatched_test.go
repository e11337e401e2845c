package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// The overview shows the requests no sender took under their path, from
// a real proxy's hookonce_unmatched_total, forwarded and refused apart,
// and no longer as a "(no sender)" sender.
func TestOverviewShowsUnmatchedByPath(t *testing.T) {
	store := openStore(t)
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: robokassa
    match: { path: /bitrix/tools/sale_ps_result.php, when: [ { form: SHP_HANDLER, equals: ROBOXCHANGE } ] }
    key: [ { form: InvId } ]
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
`)
	do := func(method, path, ctype, body string) int {
		req, _ := http.NewRequest(method, px.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const bitrix = "/bitrix/tools/sale_ps_result.php"
	for _, c := range []struct {
		method, path, ctype, body string
		want                      int
	}{
		{"POST", bitrix, "application/json", `{"event":"payment.succeeded"}`, 200}, // forwarded
		{"POST", bitrix, "application/x-www-form-urlencoded", "mdOrder=1", 200},    // forwarded
		{"PUT", bitrix, "application/json", `{}`, 405},                             // refused
		{"GET", "/hooks/shop", "", "", 405},                                        // refused
	} {
		if got := do(c.method, c.path, c.ctype, c.body); got != c.want {
			t.Fatalf("%s %s: %d, want %d", c.method, c.path, got, c.want)
		}
	}
	h, err := admin.New(admin.Options{Store: store, Gatherer: px.Registry, Token: testToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	adm := httptest.NewServer(h)
	defer adm.Close()
	status, _, body := get(t, adm.URL+"/ui/overview", nil, testToken)
	if status != 200 {
		t.Fatalf("overview: %d\n%s", status, body)
	}
	for _, want := range []string{
		`<tr data-path="` + bitrix + `"><td><code>` + bitrix + `</code></td><td class="num forwarded">2</td><td class="num refused">1</td></tr>`,
		`<tr data-path="/hooks/shop"><td><code>/hooks/shop</code></td><td class="num forwarded">0</td><td class="num refused">1</td></tr>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview has no %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, "(no sender)") || strings.Contains(body, `data-sender=""`) {
		t.Errorf("the unmatched requests are still shown as (no sender):\n%s", body)
	}
}

// /readyz reports the site (Options.Site) in its text and JSON answers
// without failing /readyz on it: a down site does not take hookonce out
// of rotation, since repeats are still answered from the store. The
// site's error goes only to a caller with the token.
func TestReadyzReportsTheSite(t *testing.T) {
	store := openStore(t)
	var calls int
	h, err := admin.New(admin.Options{Store: store, Token: testToken, Logger: slog.New(slog.DiscardHandler),
		Site: func(ctx context.Context) error {
			calls++
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	adm := httptest.NewServer(h)
	defer adm.Close()
	ready := func(accept, token string) (int, string) {
		req, _ := http.NewRequest("GET", adm.URL+"/readyz", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := ready("", ""); st != 200 || body != "ok\nsite: reachable\n" {
		t.Fatalf("site up: %d %q", st, body)
	}
	// The site goes down (a fresh handler: a check is kept for 2 s).
	h2, _ := admin.New(admin.Options{Store: store, Token: testToken, Logger: slog.New(slog.DiscardHandler),
		Site: func(ctx context.Context) error {
			return &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
		}})
	adm2 := httptest.NewServer(h2)
	defer adm2.Close()
	adm.URL = adm2.URL
	st, body := ready("", "")
	if st != 200 || !strings.HasPrefix(body, "ok\nsite: unreachable (hookonce stays ready") || strings.Contains(body, "refused") {
		t.Fatalf("site down, no token: %d %q", st, body)
	}
	if st, body := ready("", testToken); st != 200 || !strings.Contains(body, "site: unreachable: dial tcp: connect: connection refused") {
		t.Fatalf("site down, with the token: %d %q", st, body)
	}
	st, body = ready("application/json", testToken)
	var got struct{ Status, Store, Site, Detail string }
	if err := json.Unmarshal(bytes.TrimSpace([]byte(body)), &got); err != nil || st != 200 ||
		got.Status != "ok" || got.Store != "ok" || got.Site != "unreachable" || !strings.Contains(got.Detail, "connection refused") {
		t.Fatalf("JSON, site down: %d %s (%v)", st, body, err)
	}
	if calls != 1 {
		t.Errorf("the first handler checked the site %d times, want 1", calls)
	}
}
