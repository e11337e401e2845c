package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/proxy/proxytest"
)

func TestServeReplayAndLookup(t *testing.T) {
	dir := t.TempDir()
	site := proxytest.NewSite(t, nil)
	cfg := filepath.Join(dir, "hookonce.yaml")
	writeFile(t, cfg, e2eConfig)
	store := "sqlite:" + filepath.Join(dir, "h.db")
	s := startServe(t, "--upstream", site.URL, "--config", cfg, "--store", store)

	url := s.URL + "/hooks/shop"
	first := proxytest.Post(t, url, `{"id":"ord-1","total":"10.00"}`)
	again := proxytest.Post(t, url, `{"id":"ord-1","total":"10.00"}`)
	if first.Status != 200 || !again.Replayed() || string(again.Body) != string(first.Body) {
		t.Fatalf("first %d %q; repeat %d replayed=%v %q", first.Status, first.Body, again.Status, again.Replayed(), again.Body)
	}
	if n := site.Executions("ord-1"); n != 1 {
		t.Fatalf("executions = %d, want 1", n)
	}

	out, errOut, code := hookonce(t, "lookup", "--json", "--store", store, "shop", "ord-1")
	if code != 0 {
		t.Fatalf("lookup exit %d: %s", code, errOut)
	}
	var rec struct {
		State    string `json:"state"`
		Response struct {
			Status   int    `json:"status"`
			BodyText string `json:"body_text"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("lookup --json: %v\n%s", err, out)
	}
	if rec.State != "done" || rec.Response.Status != 200 || rec.Response.BodyText != string(first.Body) {
		t.Fatalf("lookup = %+v, want done 200 %q", rec, first.Body)
	}
	out, _, code = hookonce(t, "lookup", "--store", store, "shop", "ord-1")
	if code != 0 || !strings.Contains(out, "state:") || !strings.Contains(out, string(first.Body)) {
		t.Fatalf("lookup (text) exit %d:\n%s", code, out)
	}
	if _, errOut, code := hookonce(t, "lookup", "--store", store, "shop", "nope"); code != 3 || !strings.Contains(errOut, `"nope"`) {
		t.Fatalf("lookup of a missing record: exit %d %q, want 3", code, errOut)
	}
	out, _, code = hookonce(t, "list", "--json", "--store", store, "--sender", "shop")
	var list []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0]["key"] != "ord-1" {
		t.Fatalf("list --json exit %d: %s", code, out)
	}

	s.Terminate(t)
}

// Main runs without the command line: Run returns once both listeners
// accept, Reload swaps the rules, Close drains, aborts the delivery still
// at the site after the drain timeout and releases its claim.
func TestMainRunReloadClose(t *testing.T) {
	dir := t.TempDir()
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("stuck") {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}
	})
	cfgFile := filepath.Join(dir, "hookonce.yaml")
	writeFile(t, cfgFile, e2eConfig)
	store := "sqlite:" + filepath.Join(dir, "h.db")
	cfg := DefaultConfig()
	cfg.ConfigPath, cfg.Upstream, cfg.Store = cfgFile, site.URL, store
	cfg.Listen, cfg.AdminListen, cfg.DrainTimeout = "127.0.0.1:0", "127.0.0.1:0", 300*time.Millisecond
	m := NewMain(cfg, "test", io.Discard)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr().String()
	if code, _ := httpGet(t, "http://"+m.AdminAddr().String()+"/healthz", ""); code != 200 {
		t.Fatalf("/healthz answered %d", code)
	}

	proxytest.Post(t, base+"/hooks/slow", `{"id":"s1"}`)
	proxytest.Post(t, base+"/hooks/slow", `{"id":"s1"}`)
	if n := site.Executions("s1"); n != 2 {
		t.Fatalf("before Reload /hooks/slow is not guarded: want 2 executions, got %d", n)
	}
	writeFile(t, cfgFile, e2eConfig+"  - name: slow\n    match: { path: /hooks/slow }\n    key: [ { body: id } ]\n")
	m.Reload()

	got := make(chan int, 1)
	go func() {
		resp, err := http.Post(base+"/hooks/slow?stuck", "application/json", strings.NewReader(`{"id":"stuck"}`))
		if err != nil {
			got <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	deadline := time.Now().Add(5 * time.Second)
	for site.Executions("stuck") == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if status := <-got; status != http.StatusServiceUnavailable {
		t.Fatalf("aborted delivery answered %d, want 503", status)
	}
	if out, errOut, code := hookonce(t, "lookup", "--store", store, "slow", "stuck"); code != 0 || !strings.Contains(out, "released") || !strings.Contains(out, "ambiguous") {
		t.Fatalf("lookup after Close: exit %d\n%s%s\nwant the claim released, its attempt ambiguous", code, out, errOut)
	}
}

// Validate reports every problem of the flags, the env and the file at
// once; serve used to stop at the first.
func TestValidateReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "senders:\n  - name: shop\n    match: { path: /x }\n    key: [ { header: X-Id } ]\n    in_progress: sometimes\n")
	t.Setenv("HOOKONCE_ADMIN_LISTEN", "0.0.0.0:9090")
	db := filepath.Join(dir, "h.db")
	_, errOut, code := hookonce(t, "serve", "--config", bad, "--upstream", "localhost:8000", "--log-level", "loud",
		"--log-format", "xml", "--admin-session-ttl", "0s", "--store", "sqlite:"+db)
	if code != exitUsage {
		t.Fatalf("exit %d, want %d: %s", code, exitUsage, errOut)
	}
	for _, want := range []string{`--log-level "loud"`, `--log-format "xml"`, "in_progress", `"localhost:8000": want an http://`,
		"--admin-session-ttl 0s", "0.0.0.0:9090 is not a loopback address"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr does not report %q:\n%s", want, errOut)
		}
	}
	if m, _ := filepath.Glob(db + "*"); len(m) > 0 {
		t.Fatalf("serve opened the store before refusing: %v", m)
	}

	cfg := DefaultConfig()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "upstream") {
		t.Fatalf("Validate of the defaults: %v, want upstream required", err)
	}
}
