package cli

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/hookonce/hookonce/proxy/proxytest"
)

// On an installed host serve finds /etc/hookonce/env as the commands do
// (no HOOKONCE_ENV_FILE), takes its secrets at start and again on each
// reload, and never puts them into its own environment.
func TestServeReadsTheHostEnvFileOnReload(t *testing.T) {
	h := fakeHost(t, hostConfigYAML, "HOST_TEST_SECRET=first\n")
	site := proxytest.NewUpstream(t, nil)
	cfg := DefaultConfig()
	cfg.ConfigPath, cfg.Upstream = h.Config, site.URL
	cfg.Store = "sqlite:" + filepath.Join(t.TempDir(), "h.db")
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.EnvFile, cfg.EnvFileRequired = envFileFor(cfg.ConfigPath)
	if cfg.EnvFile != h.EnvFile || cfg.EnvFileRequired {
		t.Fatalf("env file for the host's config: %q (required %v), want %q", cfg.EnvFile, cfg.EnvFileRequired, h.EnvFile)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, "test", &proxytest.SyncBuffer{})
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	deliver := func(id, secret string) int {
		body := `{"id":"` + id + `"}`
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(body))
		return proxytest.Post(t, "http://"+m.Addr().String()+"/hook", body, "X-Event-Id", id, "X-Signature", hex.EncodeToString(mac.Sum(nil))).Status
	}
	if got := deliver("e1", "first"); got != http.StatusOK {
		t.Fatalf("signed with the file's secret: %d", got)
	}
	write(t, h.EnvFile, "HOST_TEST_SECRET=second\n")
	m.Reload()
	if got, old := deliver("e2", "second"), deliver("e3", "first"); got != http.StatusOK || old != http.StatusUnauthorized {
		t.Fatalf("after the reload: new secret %d, old %d; want 200 and 401", got, old)
	}
	if site.Executions("e1") != 1 || site.Executions("e2") != 1 || site.Executions("e3") != 0 {
		t.Fatalf("site runs e1 %d, e2 %d, e3 %d; want 1, 1, 0", site.Executions("e1"), site.Executions("e2"), site.Executions("e3"))
	}
	if v, ok := os.LookupEnv("HOST_TEST_SECRET"); ok {
		t.Fatalf("serve put the secret into its environment: %q", v)
	}

	// Another config file: no env file, the process environment only.
	if p, _ := envFileFor(filepath.Join(t.TempDir(), "hookonce.yaml")); p != "" {
		t.Fatalf("env file for a config elsewhere: %q, want none", p)
	}
	t.Setenv("HOOKONCE_ENV_FILE", "/some/env")
	if p, req := envFileFor(filepath.Join(t.TempDir(), "hookonce.yaml")); p != "/some/env" || !req {
		t.Fatalf("HOOKONCE_ENV_FILE: %q (required %v)", p, req)
	}
}
