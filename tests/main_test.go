package tests

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/servetest"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// binary is hookonce built once for the tests that drive it as an operator
// would: through its command line, signals and exit codes.
var binary string

func TestMain(m *testing.M) {
	// The tests run from the repository's root, as an operator's commands
	// do from a checkout: they name deploy/, docs/ and the Dockerfile by
	// their paths there, and build the binary from ".".
	if err := os.Chdir(".."); err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "hookonce-bin")
	if err != nil {
		panic(err)
	}
	binary, err = servetest.Build(dir, nil, "-race")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// hookonce runs a one-shot command and returns stdout, stderr, exit code.
func hookonce(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run hookonce %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

func startServe(t *testing.T, args ...string) *servetest.Server {
	t.Helper()
	return startServeAs(t, binary, nil, args...)
}

// startServeAs is startServe running the binary bin as cred's user (nil:
// this process's).
func startServeAs(t *testing.T, bin string, cred *syscall.Credential, args ...string) *servetest.Server {
	t.Helper()
	return servetest.Start(t, servetest.Options{Bin: bin, Cred: cred, Args: args})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

const e2eConfig = `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
`

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "senders:\n  - name: shop\n    match: { path: /x }\n    key: [ { header: X-Id } ]\n    in_progress: sometimes\n")
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"invalid config", []string{"serve", "--upstream", "http://127.0.0.1:1", "--config", bad}, 2, []string{bad, `sender "shop"`, "in_progress"}},
		{"missing config file", []string{"serve", "--upstream", "http://127.0.0.1:1", "--config", filepath.Join(dir, "none.yaml")}, 2, []string{"none.yaml"}},
		{"no upstream", []string{"serve"}, 2, []string{"upstream"}},
		{"bad upstream", []string{"serve", "--upstream", "localhost:8000"}, 2, []string{"upstream", "http://"}},
		{"unknown flag", []string{"serve", "--nope"}, 2, []string{"nope"}},
		{"lookup args", []string{"lookup", "shop"}, 2, []string{"usage"}},
		{"unknown store", []string{"list", "--store", "mysql://u:hunter2@db/x"}, 1, []string{"unknown store", "u:xxxxx@"}},
		{"version", []string{"version"}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := hookonce(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q does not name %q", errOut, w)
				}
			}
			if strings.Contains(errOut, "hunter2") {
				t.Errorf("stderr leaks a password: %s", errOut)
			}
		})
	}
}

func TestSIGHUPReload(t *testing.T) {
	dir := t.TempDir()
	site := proxytest.NewSite(t, nil)
	cfg := filepath.Join(dir, "hookonce.yaml")
	writeFile(t, cfg, e2eConfig)
	s := startServe(t, "--upstream", site.URL, "--config", cfg, "--store", "sqlite:"+filepath.Join(dir, "h.db"))
	base := s.URL

	proxytest.Post(t, base+"/hooks/crm", `{"id":"c1"}`)
	proxytest.Post(t, base+"/hooks/crm", `{"id":"c1"}`)
	if n := site.Executions("c1"); n != 2 {
		t.Fatalf("before reload /hooks/crm is not guarded: want 2 executions, got %d", n)
	}
	writeFile(t, cfg, e2eConfig+"  - name: crm\n    match: { path: /hooks/crm }\n    key: [ { body: id } ]\n")
	_ = s.Signal(syscall.SIGHUP)
	s.WaitLog(t, "config reloaded")
	proxytest.Post(t, base+"/hooks/crm", `{"id":"c2"}`)
	if r := proxytest.Post(t, base+"/hooks/crm", `{"id":"c2"}`); !r.Replayed() || site.Executions("c2") != 1 {
		t.Fatalf("after reload: replayed=%v executions=%d", r.Replayed(), site.Executions("c2"))
	}

	writeFile(t, cfg, "senders: [ { name: BAD } ]\n")
	_ = s.Signal(syscall.SIGHUP)
	l := s.WaitLog(t, "config reload refused; the previous rules stay in force")
	if !strings.Contains(fmt.Sprint(l["problems"]), cfg) {
		t.Fatalf("refusal does not name the file: %v", l)
	}
	if r := proxytest.Post(t, base+"/hooks/crm", `{"id":"c2"}`); !r.Replayed() {
		t.Fatalf("the old rules were dropped by a refused reload: %d", r.Status)
	}
	if n := s.CountLog("config reloaded"); n != 1 {
		t.Fatalf("reloaded %d times, want 1", n)
	}
}

// SIGTERM while a delivery sits at a slow site: after --drain-timeout the
// forward is aborted, the sender gets 503 and the claim is released, so the
// sender's retry will run the handler.
func TestSIGTERMAbortsAndReleases(t *testing.T) {
	dir := t.TempDir()
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	cfg := filepath.Join(dir, "hookonce.yaml")
	writeFile(t, cfg, e2eConfig)
	store := "sqlite:" + filepath.Join(dir, "h.db")
	s := startServe(t, "--upstream", site.URL, "--config", cfg, "--store", store, "--drain-timeout", "300ms")

	got := make(chan int, 1)
	go func() {
		resp, err := http.Post(s.URL+"/hooks/shop", "application/json", strings.NewReader(`{"id":"stuck"}`))
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
	_ = s.Signal(syscall.SIGTERM)
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
	if status := <-got; status != http.StatusServiceUnavailable {
		t.Fatalf("aborted delivery answered %d, want 503", status)
	}
	if out, _, code := hookonce(t, "lookup", "--store", store, "shop", "stuck"); code != 0 || !strings.Contains(out, "released") || !strings.Contains(out, "ambiguous") {
		t.Fatalf("lookup after abort: exit %d\n%s\nwant the claim released, its attempt ambiguous", code, out)
	}
}
