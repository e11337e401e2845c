package tests

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hookonce/hookonce/proxy/proxytest"
)

// A secret changed in the environment file takes effect on SIGHUP, no
// restart: serve started as systemd starts it (the file's values in its
// environment too, HOOKONCE_ENV_FILE naming the file) takes the new
// secret on reload and refuses the old one. A file that cannot be read
// on reload refuses the reload, and the secret in force stays.
func TestSIGHUPRereadsTheEnvFile(t *testing.T) {
	dir := t.TempDir()
	site := proxytest.NewSite(t, nil)
	cfg := filepath.Join(dir, "hookonce.yaml")
	writeFile(t, cfg, `
senders:
  - name: gh
    preset: github
    match: { path: /hooks/gh }
    signature: { secret_env: GH_TEST_SECRET }
`)
	envFile := filepath.Join(dir, "env")
	writeFile(t, envFile, "# secrets\nGH_TEST_SECRET=old-secret\n")
	t.Setenv("GH_TEST_SECRET", "old-secret") // what systemd put in the environment at start
	t.Setenv("HOOKONCE_ENV_FILE", envFile)
	s := startServe(t, "--upstream", site.URL, "--config", cfg, "--store", "sqlite:"+filepath.Join(dir, "h.db"))
	base := s.URL

	deliver := func(id, secret string) int {
		t.Helper()
		body := `{"action":"opened","id":"` + id + `"}`
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(body))
		return proxytest.Post(t, base+"/hooks/gh", body, "X-GitHub-Delivery", id,
			"X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil))).Status
	}
	if got := deliver("d1", "old-secret"); got != http.StatusOK {
		t.Fatalf("signed with the secret at start: %d", got)
	}
	if got := deliver("d2", "new-secret"); got != http.StatusUnauthorized {
		t.Fatalf("signed with a secret not yet configured: %d, want 401", got)
	}

	writeFile(t, envFile, "# secrets\nGH_TEST_SECRET=new-secret\n")
	_ = s.Signal(syscall.SIGHUP)
	s.WaitLog(t, "config reloaded")
	if got := deliver("d3", "new-secret"); got != http.StatusOK {
		t.Fatalf("signed with the new secret after the reload: %d, want 200", got)
	}
	if got := deliver("d4", "old-secret"); got != http.StatusUnauthorized {
		t.Fatalf("signed with the old secret after the reload: %d, want 401", got)
	}

	writeFile(t, envFile, "GH_TEST_SECRET=x\nnot a line\n")
	_ = s.Signal(syscall.SIGHUP)
	l := s.WaitLog(t, "config reload refused; the previous rules stay in force")
	if p, _ := l["problems"].(string); p == "" || !strings.Contains(p, envFile+":2") || strings.Contains(p, "GH_TEST_SECRET=x") {
		t.Fatalf("the refusal should name the file's line and no value: %v", l)
	}
	if got := deliver("d5", "new-secret"); got != http.StatusOK {
		t.Fatalf("after a refused reload the secret in force changed: %d", got)
	}
	for id, want := range map[string]int{"d1": 1, "d2": 0, "d3": 1, "d4": 0, "d5": 1} {
		if n := site.Executions(id); n != want {
			t.Errorf("the site ran %s %d times, want %d", id, n, want)
		}
	}
	s.Terminate(t)
}
