package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/testenv"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// lostEvent runs a proxy whose site fails, leaves one released event with
// its request kept, and serves the admin handler (with the test token)
// wired to the proxy the way serve wires it. up brings the site back.
func lostEvent(t *testing.T) (adm *httptest.Server, site *proxytest.Site, store dedupe.Store, up *atomic.Bool) {
	t.Helper()
	return lostEventWith(t, testToken)
}

// lostEventWith is lostEvent with the admin token given ("": none).
func lostEventWith(t *testing.T, token string) (adm *httptest.Server, site *proxytest.Site, store dedupe.Store, up *atomic.Bool) {
	t.Helper()
	up = &atomic.Bool{}
	site = proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	store = openStore(t)
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
    store_request_body: true
`)
	if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"lost-7"}`); r.Status != 503 {
		t.Fatalf("site down: %d", r.Status)
	}
	h, err := admin.New(admin.Options{Store: store, Token: token, Logger: slog.New(slog.DiscardHandler),
		Redeliver: func(ctx context.Context, sender, key string, force bool) (admin.Redelivery, error) {
			res, err := px.Proxy.Redeliver(ctx, sender, key, force)
			if errors.Is(err, proxy.ErrDone) || errors.Is(err, proxy.ErrNotKept) {
				return admin.Redelivery{}, fmt.Errorf("%w: %w", admin.ErrRefused, err)
			}
			return admin.Redelivery{Outcome: res.Outcome, Status: res.Status}, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	adm = httptest.NewServer(h)
	t.Cleanup(adm.Close)
	return adm, site, store, up
}

// playwright is the directory of the Node scripts that drive Chromium;
// without playwright-core installed there the test skips, except under CI.
func playwright(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("testdata/browser")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		testenv.Missing(t, "playwright-core is not installed under admin/testdata/browser", "cd admin/testdata/browser && npm ci")
	}
	return dir
}

// The page's redeliver button, pressed in headless Chromium, with a token
// (signed in) and without one (the listener's cross-site rules let the
// page's own form through): the handler runs once and the record is done,
// with the operator's attempt.
func TestRedeliverButtonInChromium(t *testing.T) {
	for _, token := range []string{testToken, ""} {
		name := map[bool]string{true: "token", false: "no token"}[token != ""]
		t.Run(name, func(t *testing.T) { redeliverButton(t, token) })
	}
}

func redeliverButton(t *testing.T, token string) {
	bin := chromium(t)
	dir := playwright(t)
	adm, site, store, up := lostEventWith(t, token)
	up.Store(true)
	shot := filepath.Join(os.TempDir(), "hookonce-ui-screenshots", "redeliver.png")
	_ = os.MkdirAll(filepath.Dir(shot), 0o755)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "redeliver.js"), adm.URL, token, "shop", "lost-7", bin)
	cmd.Env = append(os.Environ(), "SCREENSHOT="+shot, "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("browser: %v\n%s", err, out)
	}
	var got struct {
		Before, After int
		Button        bool
		Note, State   string
	}
	if err := json.Unmarshal(out[strings.LastIndexByte(strings.TrimSpace(string(out)), '\n')+1:], &got); err != nil {
		t.Fatalf("browser said %q: %v", out, err)
	}
	t.Logf("page: %+v; screenshot %s", got, shot)
	if !got.Button || got.Before != 1 || got.After != 2 || got.State != "done" || !strings.Contains(got.Note, "Redelivered: processed") {
		t.Fatalf("page after pressing Redeliver = %+v", got)
	}
	if n := site.Executions("lost-7"); n != 2 {
		t.Fatalf("the handler ran %d times, want 2 (the failed run and the redelivery)", n)
	}
	rec, err := store.Get(context.Background(), "shop", "lost-7")
	if err != nil || rec.State != dedupe.StateDone || rec.LastAttempt().By != dedupe.AttemptByOperator {
		t.Fatalf("record = %+v, %v", rec, err)
	}
}

// A redelivery POST without the page's CSRF token, or with another
// session's, is refused and runs nothing; the API needs the bearer token.
func TestRedeliverNeedsCSRFAndToken(t *testing.T) {
	adm, site, _, up := lostEvent(t)
	up.Store(true)
	jar := newSession(t, adm.URL)
	post := func(form url.Values) int { return postForm(t, adm.URL+"/ui/redeliver/shop/lost-7", jar, form) }
	if got := post(url.Values{}); got != http.StatusForbidden {
		t.Errorf("no token: %d, want 403", got)
	}
	if got := post(url.Values{"csrf": {strings.Repeat("0", 64)}}); got != http.StatusForbidden {
		t.Errorf("wrong token: %d, want 403", got)
	}
	req, _ := http.NewRequest("POST", adm.URL+"/v1/redeliver/shop/lost-7", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("API without the bearer token: %v %v", resp, err)
	}
	if site.Executions("lost-7") != 1 {
		t.Fatalf("a refused redelivery ran the handler (%d runs)", site.Executions("lost-7"))
	}
	// The API with the token works, and a done event is refused (409).
	api := func() int {
		req, _ := http.NewRequest("POST", adm.URL+"/v1/redeliver/shop/lost-7", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := api(); got != 200 || site.Executions("lost-7") != 2 {
		t.Fatalf("API redeliver: %d, runs %d", got, site.Executions("lost-7"))
	}
	if got := api(); got != http.StatusConflict || site.Executions("lost-7") != 2 {
		t.Fatalf("API redeliver of a done event: %d, runs %d; want 409 and no run", got, site.Executions("lost-7"))
	}
}

// postForm POSTs form to target with the session cookies of jar, as the
// page's forms do, and answers the status (redirects not followed).
func postForm(t *testing.T, target string, jar []*http.Cookie, form url.Values) int {
	t.Helper()
	req, _ := http.NewRequest("POST", target, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range jar {
		req.AddCookie(c)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// newSession signs in and returns the session cookies.
func newSession(t *testing.T, base string) []*http.Cookie {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + "/ui/login?token=" + url.QueryEscape(testToken))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(resp.Cookies()) == 0 {
		t.Fatalf("no session cookie (status %d)", resp.StatusCode)
	}
	return resp.Cookies()
}
