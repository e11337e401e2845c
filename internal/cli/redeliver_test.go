package cli

import (
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/proxy/proxytest"
)

// hookonce redeliver against a running serve (through its admin API):
// one event, then every unretried one; a done event is refused.
func TestRedeliverCommand(t *testing.T) {
	var up atomic.Bool
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookonce.yaml")
	writeFile(t, cfg, `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
    store_request_body: true
    retry_window: 1s
`)
	store := "sqlite:" + filepath.Join(dir, "h.db")
	s := startServe(t, "--upstream", site.URL, "--config", cfg, "--store", store)
	admin := s.Admin
	for _, id := range []string{"a", "b", "c"} {
		if r := proxytest.Post(t, s.URL+"/hooks/shop", `{"id":"`+id+`"}`); r.Status != 503 {
			t.Fatalf("site down: %d", r.Status)
		}
	}
	up.Store(true)

	// serve's admin listener has no token (loopback): another site's form
	// POST is refused and runs nothing, a rebound Host reads nothing.
	form, _ := http.NewRequest("POST", admin+"/v1/redeliver/shop/a?force=true", strings.NewReader("x=1"))
	form.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	form.Header.Set("Origin", "http://evil.example")
	if resp, err := http.DefaultClient.Do(form); err != nil || resp.StatusCode != http.StatusForbidden || site.Executions("a") != 1 {
		t.Fatalf("cross-site form POST: %v %v, executions %d", resp, err, site.Executions("a"))
	}
	rebound, _ := http.NewRequest("GET", admin+"/v1/events/shop/a", nil)
	rebound.Host = "evil.example:9090"
	if resp, err := http.DefaultClient.Do(rebound); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("GET with a foreign Host: %v %v", resp, err)
	}

	// The CLI sends what the listener asks of a write without a token.
	out, errOut, code := hookonce(t, "redeliver", "--admin", admin, "shop", "a")
	if code != 0 || !strings.Contains(out, "shop a: processed (status 200)") || site.Executions("a") != 2 {
		t.Fatalf("redeliver a: exit %d %q %q, executions %d", code, out, errOut, site.Executions("a"))
	}
	out, _, _ = hookonce(t, "lookup", "--store", store, "shop", "a")
	if !strings.Contains(out, "operator") || !strings.Contains(out, "released") {
		t.Fatalf("lookup shows no attempts:\n%s", out)
	}
	// Done now: refused without --force, nothing runs.
	if _, errOut, code := hookonce(t, "redeliver", "--admin", admin, "shop", "a"); code != 1 || !strings.Contains(errOut, "refused") || site.Executions("a") != 2 {
		t.Fatalf("redeliver of a done event: exit %d %q, executions %d", code, errOut, site.Executions("a"))
	}
	time.Sleep(1100 * time.Millisecond) // past the sender's retry window
	out, _, code = hookonce(t, "list", "--store", store, "--status", "unretried", "--config", cfg)
	if code != 0 || !strings.Contains(out, " b ") || !strings.Contains(out, " c ") || strings.Contains(out, " a ") {
		t.Fatalf("list --status unretried: exit %d\n%s", code, out)
	}
	out, errOut, code = hookonce(t, "redeliver", "--admin", admin, "--status", "unretried")
	if code != 0 || !strings.Contains(out, "shop b: processed") || !strings.Contains(out, "shop c: processed") {
		t.Fatalf("redeliver --status unretried: exit %d %q %q", code, out, errOut)
	}
	if site.Executions("b") != 2 || site.Executions("c") != 2 {
		t.Fatalf("executions b %d c %d, want 2 each", site.Executions("b"), site.Executions("c"))
	}
}
