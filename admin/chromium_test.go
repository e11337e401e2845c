package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/testenv"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// chromium finds the browser; without one the test skips, except under CI
// where a missing browser is a failure.
func chromium(t *testing.T) string {
	t.Helper()
	return testenv.LookPath(t, "apt-get install chromium", "chromium", "chromium-browser", "/usr/bin/chromium")
}

// browse runs headless Chromium once on u with the given mode flags and
// returns its stdout.
func browse(t *testing.T, bin, profile, u string, mode ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--user-data-dir=" + profile}, mode...)
	args = append(args, u)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+profile)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(mode, " "), err, stderr.String())
	}
	return stdout.String()
}

// screenshot saves the page as a PNG under os.TempDir() (kept after the
// test, so a person can look at it) and logs its path.
func screenshot(t *testing.T, bin, u, name string) {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "hookonce-ui-screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	_ = os.Remove(path)
	browse(t, bin, t.TempDir(), u, "--screenshot="+path, "--window-size=1200,900")
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 1000 || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot %s: %d bytes, %v", path, len(b), err)
	}
	t.Logf("screenshot of %s: %s (%d bytes)", name, path, len(b))
}

var (
	eventRowRE = regexp.MustCompile(`<tr class="event">`)
	bodyRE     = regexp.MustCompile(`(?s)<pre id="body">(.*?)</pre>`)
)

// TestInspectionPageInChromium runs the acceptance protocol against an
// SQLite store, then opens the inspection page in headless Chromium: the
// list shows the protocol's events, and a record's detail shows the stored
// answer exactly.
func TestInspectionPageInChromium(t *testing.T) {
	bin := chromium(t)
	store := openStore(t)
	proxytest.RunAcceptance(t, func(*testing.T) dedupe.Store { return store })
	if t.Failed() {
		t.FailNow()
	}
	recs, err := store.List(context.Background(), dedupe.ListFilter{Sender: "shop"})
	if err != nil || len(recs) == 0 {
		t.Fatalf("the protocol left no records: %v", err)
	}

	h, err := admin.New(admin.Options{Store: store, Token: testToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	adm := httptest.NewServer(h) // 127.0.0.1, random port
	t.Cleanup(adm.Close)
	login := func(next string) string {
		return adm.URL + "/ui/login?" + url.Values{"token": {testToken}, "next": {next}}.Encode()
	}

	t.Run("list shows the protocol's events", func(t *testing.T) {
		dom := browse(t, bin, t.TempDir(), login("/ui/events"), "--dump-dom")
		if n := len(eventRowRE.FindAllString(dom, -1)); n != len(recs) {
			t.Errorf("page lists %d events, the store holds %d", n, len(recs))
		}
		for _, r := range recs {
			if !strings.Contains(dom, ">"+r.Key+"</a>") {
				t.Errorf("event %s is not listed", r.Key)
			}
		}
		if t.Failed() {
			t.Logf("DOM:\n%s", dom)
		}
	})

	t.Run("detail shows the stored answer", func(t *testing.T) {
		var done dedupe.Record
		for _, r := range recs {
			if r.State == dedupe.StateDone && r.Response != nil && strings.HasPrefix(r.Key, "evt-") {
				done = r
			}
		}
		if done.Response == nil {
			t.Fatalf("no done evt- record among %d", len(recs))
		}
		next := "/ui/events/shop/" + url.PathEscape(done.Key)
		dom := browse(t, bin, t.TempDir(), login(next), "--dump-dom")
		m := bodyRE.FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("no stored body on the detail page:\n%s", dom)
		}
		if got := html.UnescapeString(m[1]); got != string(done.Response.Body) {
			t.Fatalf("page shows %q, the store holds %q", got, done.Response.Body)
		}
		if !strings.Contains(dom, `id="status">201<`) || !strings.Contains(dom, "order-for-"+done.Key) {
			t.Fatalf("status or headers missing from the detail page:\n%s", dom)
		}
		screenshot(t, bin, login(next), "event-detail")
	})

	t.Run("without the token the page asks to sign in", func(t *testing.T) {
		dom := browse(t, bin, t.TempDir(), adm.URL+"/ui/events", "--dump-dom")
		if !strings.Contains(dom, `name="token"`) || eventRowRE.MatchString(dom) {
			t.Fatalf("page without a session:\n%s", dom)
		}
	})

	screenshot(t, bin, login("/ui/events"), "events")
	screenshot(t, bin, login("/ui/conflicts"), "conflicts")
}

// The attack, in a real browser: a page on http://evil.example submits
// forms to a listener without a token (a forced redelivery of a done
// event, the release of a held one), and reads the API under its own name
// as a DNS-rebinding page would. Each is refused, the site's handler runs
// no more, the records stay; a script on the listener's own origin posting
// JSON still works.
func TestCrossSiteAttackInChromium(t *testing.T) {
	bin := chromium(t)
	dir := playwright(t)
	adm, site, store, up := lostEventWith(t, "")
	up.Store(true)
	if r := send(t, "POST", adm.URL+"/v1/redeliver/shop/lost-7", map[string]string{"Content-Type": "application/json"}, ""); r.status != 200 {
		t.Fatalf("redeliver: %d %s", r.status, r.body)
	}
	held(t, store, "amb-5")
	targets := map[string]string{"redeliver": "/v1/redeliver/shop/lost-7?force=true", "release": "/v1/release/shop/amb-5"}
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, ok := targets[strings.TrimPrefix(r.URL.Path, "/attack/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, `<!doctype html><form id="f" method="post" action="`+html.EscapeString(adm.URL+path)+
			`"><input name="x" value="1"></form><script>document.getElementById("f").submit()</script>`)
	}))
	t.Cleanup(evil.Close)
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "evil.example", 1)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "attack.js"), adm.URL, evilURL, bin)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("browser: %v\n%s", err, out)
	}
	var got map[string]struct {
		Status int
		Body   string
	}
	if err := json.Unmarshal(out[strings.LastIndexByte(strings.TrimSpace(string(out)), '\n')+1:], &got); err != nil {
		t.Fatalf("browser said %q: %v", out, err)
	}
	t.Logf("browser: %+v", got)
	for _, name := range []string{"redeliver", "release"} {
		if g := got[name]; g.Status != http.StatusForbidden || !strings.Contains(g.Body, "Cross-site request refused") {
			t.Errorf("the cross-site form to %s: %+v, want 403 Cross-site request refused", name, g)
		}
	}
	if g := got["rebind"]; g.Status != http.StatusMisdirectedRequest || strings.Contains(g.Body, "lost-7") {
		t.Errorf("the rebound read: %+v, want 421 and no record", g)
	}
	if g := got["sameorigin"]; g.Status != http.StatusOK || !strings.Contains(g.Body, "processed") {
		t.Errorf("the same-origin JSON POST: %+v, want 200 processed", g)
	}
	// 1 failed run, the setup's redelivery, the same-origin forced one.
	if n := site.Executions("lost-7"); n != 3 {
		t.Errorf("the handler ran %d times, want 3 (none for the attack)", n)
	}
	if rec, err := store.Get(context.Background(), "shop", "amb-5"); err != nil || rec.State != dedupe.StateUnknown {
		t.Errorf("the held record after the attack: %+v %v", rec, err)
	}
}
