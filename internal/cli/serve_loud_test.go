package cli

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/proxy/proxytest"
)

// Failures are loud: a site that does not answer is a WARN at start, a
// WARN for the first forwards that cannot reach it and an ERROR from the
// third in a row; /readyz reports it and stays 200; a reload refused for
// an invalid file is an ERROR and sets hookonce_config_last_reload_successful
// to 0, a good one back to 1 with a new timestamp.
func TestServeSaysWhenTheSiteIsDownAndAReloadIsRefused(t *testing.T) {
	dir := t.TempDir()
	// An address nothing listens on: a port taken and given back.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	ln.Close()

	cfgFile := filepath.Join(dir, "hookonce.yaml")
	writeFile(t, cfgFile, e2eConfig)
	cfg := DefaultConfig()
	cfg.ConfigPath, cfg.Upstream, cfg.Store = cfgFile, "http://"+deadAddr, "sqlite:"+filepath.Join(dir, "h.db")
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	logs := &proxytest.SyncBuffer{}
	m := NewMain(cfg, "test", logs)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	admin := "http://" + m.AdminAddr().String()

	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "the site does not answer at start") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !regexp.MustCompile(`level=WARN msg="the site does not answer at start[^\n]*upstream=http://` + regexp.QuoteMeta(deadAddr)).MatchString(logs.String()) {
		t.Fatalf("no warning at start that the site does not answer:\n%s", logs)
	}
	if code, body := httpGet(t, admin+"/readyz", ""); code != 200 || !strings.Contains(body, "site: unreachable") {
		t.Fatalf("/readyz with the site down: %d %q, want 200 reporting it", code, body)
	}

	for i := range 3 {
		r := proxytest.Post(t, "http://"+m.Addr().String()+"/hooks/shop", `{"id":"e`+string(rune('0'+i))+`"}`)
		if r.Status != http.StatusBadGateway {
			t.Fatalf("delivery %d with the site down: %d, want 502", i+1, r.Status)
		}
	}
	lines := regexp.MustCompile(`level=(\w+) msg=webhook [^\n]*site_unreachable=true unreachable_in_a_row=(\d)`).FindAllStringSubmatch(logs.String(), -1)
	if len(lines) != 3 || lines[0][1] != "WARN" || lines[1][1] != "WARN" || lines[2][1] != "ERROR" || lines[2][2] != "3" {
		t.Fatalf("the three unreachable forwards logged %v, want WARN, WARN, ERROR:\n%s", lines, logs)
	}

	metric := func(name string) string {
		_, body := httpGet(t, admin+"/metrics", "")
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("/metrics has no %s", name)
		}
		return m[1]
	}
	if v := metric("hookonce_config_last_reload_successful"); v != "1" {
		t.Fatalf("at start hookonce_config_last_reload_successful = %s, want 1", v)
	}
	started := metric("hookonce_config_last_reload_success_timestamp_seconds")
	writeFile(t, cfgFile, "senders:\n  - name: shop\n    match: { path: /hooks/shop }\n    kye: [ { body: id } ]\n")
	m.Reload()
	if v := metric("hookonce_config_last_reload_successful"); v != "0" {
		t.Fatalf("after a refused reload hookonce_config_last_reload_successful = %s, want 0", v)
	}
	if !regexp.MustCompile(`level=ERROR msg="config reload refused; the previous rules stay in force"`).MatchString(logs.String()) {
		t.Fatalf("the refused reload is not an ERROR:\n%s", logs)
	}
	if v := metric("hookonce_config_last_reload_success_timestamp_seconds"); v != started {
		t.Fatalf("a refused reload moved the success timestamp: %s → %s", started, v)
	}
	time.Sleep(1100 * time.Millisecond) // the timestamp has a second's resolution in its text
	writeFile(t, cfgFile, e2eConfig)
	m.Reload()
	if v := metric("hookonce_config_last_reload_successful"); v != "1" {
		t.Fatalf("after a good reload hookonce_config_last_reload_successful = %s, want 1", v)
	}
	if v := metric("hookonce_config_last_reload_success_timestamp_seconds"); v == started {
		t.Fatalf("a good reload left the success timestamp at %s", v)
	}
}
