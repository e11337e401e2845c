package cli

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/internal/testkit/unprivileged"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// On an installed host serve finds /etc/hookonce/env as the commands do
// (no HOOKONCE_ENV_FILE), takes its secrets at start and again on each
// reload, and never puts them into its own environment.
func TestServeReadsTheHostEnvFileOnReload(t *testing.T) {
	h := fakeHost(t, hostConfigYAML, "HOST_TEST_SECRET=first\n")
	site := proxytest.NewSite(t, nil)
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

// The hand-installed unit runs serve as a DynamicUser that cannot read
// the root-only /etc/hookonce/env (systemd read it as root at start):
// serve still starts, with the secrets of its environment, and says that
// a changed secret then takes a restart. A file HOOKONCE_ENV_FILE names
// that cannot be read is an error.
func TestServeStartsWhenTheHostEnvFileIsUnreadable(t *testing.T) {
	if unprivileged.Rerun(t) {
		return
	}
	h := fakeHost(t, hostConfigYAML, "HOST_TEST_SECRET=in-file\n")
	if err := os.Chmod(h.EnvFile, 0); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOST_TEST_SECRET", "from-start") // what systemd put in the environment
	site := proxytest.NewSite(t, nil)
	cfg := DefaultConfig()
	cfg.ConfigPath, cfg.Upstream = h.Config, site.URL
	cfg.Store = "sqlite:" + filepath.Join(t.TempDir(), "h.db")
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.EnvFile, cfg.EnvFileRequired = envFileFor(cfg.ConfigPath)
	logs := &proxytest.SyncBuffer{}
	m := NewMain(cfg, "test", logs)
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("serve with an unreadable host env file: %v", err)
	}
	defer m.Close()
	if !strings.Contains(logs.String(), "level=WARN msg=\"environment file "+h.EnvFile+" is not readable") {
		t.Fatalf("no warning about the unreadable env file:\n%s", logs)
	}
	body := `{"id":"u1"}`
	mac := hmac.New(sha256.New, []byte("from-start"))
	mac.Write([]byte(body))
	if got := proxytest.Post(t, "http://"+m.Addr().String()+"/hook", body, "X-Event-Id", "u1", "X-Signature", hex.EncodeToString(mac.Sum(nil))).Status; got != http.StatusOK || site.Executions("u1") != 1 {
		t.Fatalf("signed with the secret serve started with: %d, %d runs", got, site.Executions("u1"))
	}

	t.Setenv("HOOKONCE_ENV_FILE", h.EnvFile)
	named := DefaultConfig()
	named.ConfigPath, named.Upstream = h.Config, site.URL
	named.EnvFile, named.EnvFileRequired = envFileFor(named.ConfigPath)
	if err := named.Validate(); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("an unreadable file HOOKONCE_ENV_FILE names: %v, want permission denied", err)
	}
}
