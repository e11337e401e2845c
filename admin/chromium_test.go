package admin_test

import (
	"bytes"
	"context"
	"html"
	"log/slog"
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
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// chromium finds the browser; without one the test skips, except under CI
// where a missing browser is a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (CI=true): install Debian's chromium package")
	}
	t.Skip("chromium is not installed; set CI=true to make this a failure")
	return ""
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
