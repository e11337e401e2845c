package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// runBounded runs hookonce to its end (at most 30s) and returns everything
// it printed and its exit code.
func runBounded(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("hookonce %s did not end in 30s:\n%s", args[0], out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// noSecret fails t when text shows any of the secrets.
func noSecret(t *testing.T, what, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s shows the password %q:\n%s", what, s, text)
		}
	}
}

// A password planted in every place a store DSN can hold one never shows
// in what hookonce prints: not when the DSN does not parse, not when the
// store cannot be reached at start-up, not in serve's logs while it runs
// and its store goes away, not in /readyz.
func TestPasswordsNeverPrinted(t *testing.T) {
	port := closedPort(t)
	dsns := []struct {
		name, dsn string
		secrets   []string
	}{
		{"postgres userinfo", fmt.Sprintf("postgres://u:pw-userinfo-1@127.0.0.1:%d/db?sslmode=disable", port), []string{"pw-userinfo-1"}},
		{"postgres password with @ and /", fmt.Sprintf("postgres://u:pw@odd/2@127.0.0.1:%d/db", port), []string{"pw@odd/2", "odd/2"}},
		{"postgres ?password=", fmt.Sprintf("postgres://u@127.0.0.1:%d/db?sslmode=disable&password=pw-query-3", port), []string{"pw-query-3"}},
		{"postgres sslpassword", fmt.Sprintf("postgres://u@127.0.0.1:%d/db?sslmode=disable&sslpassword=pw-ssl-4", port), []string{"pw-ssl-4"}},
		{"postgres that does not parse", "postgres://u:pw-unparsed-5@127.0.0.1:notaport/db?password=pw-unparsed-6", []string{"pw-unparsed-5", "pw-unparsed-6"}},
		{"keyword/value", fmt.Sprintf("host=127.0.0.1 port=%d user=u password=pw-kv-7 dbname=db", port), []string{"pw-kv-7"}},
		{"keyword/value quoted", "host=127.0.0.1 user=u password='pw kv 8' dbname=db", []string{"pw kv 8", "kv 8"}},
		// (max_retries=-1: a refused connection fails at once.)
		{"redis :password@", fmt.Sprintf("redis://:pw-redis-9@127.0.0.1:%d/0?max_retries=-1", port), []string{"pw-redis-9"}},
		{"redis user:password@", fmt.Sprintf("redis://hook:pw-redis-10@127.0.0.1:%d/0?max_retries=-1", port), []string{"pw-redis-10"}},
		{"redis ?password=", fmt.Sprintf("redis://127.0.0.1:%d/0?password=pw-redis-11", port), []string{"pw-redis-11"}},
		{"redis that does not parse", "redis://:pw-redis-12@127.0.0.1:badport/0", []string{"pw-redis-12"}},
		{"redis sentinel", fmt.Sprintf("redis+sentinel://:pw-redis-13@127.0.0.1:%d?master_name=m&sentinel_password=pw-redis-14&max_retries=-1", port),
			[]string{"pw-redis-13", "pw-redis-14"}},
	}
	commands := [][]string{
		{"serve", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"},
		{"list"}, {"lookup", "shop", "k"}, {"conflicts"}, {"release", "shop", "k"}, {"purge"}, {"migrate"},
	}
	for _, d := range dsns {
		t.Run(d.name, func(t *testing.T) {
			for _, cmd := range commands {
				args := append([]string{cmd[0], "--store", d.dsn}, cmd[1:]...)
				out, code := runBounded(t, args...)
				if code == 0 || strings.TrimSpace(out) == "" {
					t.Errorf("%s: exit %d, %q; want a failure that says why", cmd[0], code, out)
				}
				noSecret(t, cmd[0], out, d.secrets...)
			}
		})
	}

	// serve on live stores with a password in the DSN, which then go away.
	site := proxytest.NewSite(t, nil)
	cfg := filepath.Join(t.TempDir(), "hookonce.yaml")
	writeFile(t, cfg, e2eConfig)
	live := func(t *testing.T, dsn string, stop func(), secrets ...string) {
		t.Helper()
		s := startServe(t, "--upstream", site.URL, "--config", cfg, "--store", dsn, "--admin-write-probe-interval", "100ms")
		admin := s.Admin
		if r := proxytest.Post(t, s.URL+"/hooks/shop", `{"id":"before"}`); r.Status != 200 {
			t.Fatalf("delivery with the store up: %d", r.Status)
		}
		stop()
		if r := proxytest.Post(t, s.URL+"/hooks/shop", `{"id":"after"}`); r.Status != 503 {
			t.Fatalf("delivery with the store gone: %d, want 503", r.Status)
		}
		waitReady(t, admin, 503)
		_, body := httpGet(t, admin+"/readyz", "")
		noSecret(t, "/readyz", body, secrets...)
		s.Terminate(t)
		logs, _ := json.Marshal(s.Logs())
		if !strings.Contains(string(logs), "xxxxx") || !strings.Contains(string(logs), `"outcome":"store_error"`) {
			t.Errorf("serve's logs lack the redacted DSN or the store error:\n%s", logs)
		}
		noSecret(t, "serve's logs", string(logs), secrets...)
	}

	t.Run("redis with requirepass", func(t *testing.T) {
		srv := redistest.Start(t)
		srv.Do(t, "ACL", "SETUSER", "hook", "on", ">pw-live-redis-user", "~*", "&*", "+@all")
		srv.Do(t, "CONFIG", "SET", "requirepass", "pw-live-redis")
		// A wrong password fails start-up without showing either.
		out, code := runBounded(t, "list", "--store", "redis://:pw-live-wrong@"+srv.Addr+"/0")
		if code != 1 || !strings.Contains(out, "WRONGPASS") {
			t.Fatalf("list with a wrong password: exit %d %s", code, out)
		}
		noSecret(t, "list with a wrong password", out, "pw-live-wrong")
		other := redistest.Start(t)
		other.Do(t, "ACL", "SETUSER", "hook", "on", ">pw-live-redis-user", "~*", "&*", "+@all")
		live(t, "redis://:pw-live-redis@"+srv.Addr+"/0?max_retries=-1", func() { srv.Stop(t) }, "pw-live-redis")
		live(t, "redis://hook:pw-live-redis-user@"+other.Addr+"/0?max_retries=-1", func() { other.Stop(t) }, "pw-live-redis-user")
	})

	t.Run("postgres", func(t *testing.T) {
		srv := pgtest.Start(t) // trust authentication: any password is accepted
		dsn := strings.Replace(srv.NewDatabase(t), "postgres://postgres@", "postgres://postgres:pw-live-pg@", 1) +
			"&sslpassword=pw-live-pg-ssl&connect_timeout=2"
		out, code := runBounded(t, "migrate", "--store", dsn)
		if code != 0 || !strings.Contains(out, "postgres://postgres:xxxxx@") {
			t.Fatalf("migrate: exit %d %s", code, out)
		}
		noSecret(t, "migrate", out, "pw-live-pg", "pw-live-pg-ssl")
		live(t, dsn, func() { srv.Stop() }, "pw-live-pg", "pw-live-pg-ssl")
	})
}
