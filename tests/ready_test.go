package tests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
	"github.com/hookonce/hookonce/internal/testkit/servetest"
	"github.com/hookonce/hookonce/internal/testkit/unprivileged"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// startProbing starts serve on store with a fast write probe and waits
// until it is ready; it returns serve and its admin base URL.
func startProbing(t *testing.T, bin string, cred *syscall.Credential, store string) (*servetest.Server, string) {
	t.Helper()
	s := startServeAs(t, bin, cred, "--upstream", proxytest.NewSite(t, nil).URL, "--store", store,
		"--admin-write-probe-interval", "100ms")
	admin := s.Admin
	waitReady(t, admin, 200)
	return s, admin
}

// waitReady polls serve's /readyz until it answers want with a body that
// contains every one of contains.
func waitReady(t *testing.T, admin string, want int, contains ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body := httpGet(t, admin+"/readyz", "")
		ok := status == want
		for _, c := range contains {
			ok = ok && strings.Contains(body, c)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still answers %d %s, want %d with %q", status, body, want, contains)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serve's /readyz turns 503, saying the store does not take writes, when
// the SQLite store stops taking them under it, and 200 once it does again:
// the file made read-only (serve runs as nobody under root, which ignores
// modes), and no room left to write (RLIMIT_FSIZE 0 set on the running
// serve process: every write to a file fails, as on a full disk).
func TestReadyzWhenTheStoreCannotWrite(t *testing.T) {
	start := func(t *testing.T, cred *syscall.Credential) (*servetest.Server, string, string) {
		t.Helper()
		bin := unprivileged.Runnable(t, cred, binary)
		dir := unprivileged.Dir(t, cred)
		path := filepath.Join(dir, "h.db")
		s, admin := startProbing(t, bin, cred, "sqlite:"+path)
		return s, admin, path
	}

	t.Run("file made read-only", func(t *testing.T) {
		s, admin, path := start(t, unprivileged.Credential(t))
		if err := os.Chmod(path, 0o444); err != nil {
			t.Fatal(err)
		}
		// No token: the listener is on loopback and the reason is shown.
		waitReady(t, admin, 503, "does not take writes", "not writable")
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		waitReady(t, admin, 200)
		s.Terminate(t)
	})

	t.Run("no room to write", func(t *testing.T) {
		// As this process's user, which may set the limits of its own
		// processes.
		s, admin, _ := start(t, nil)
		pid := s.Pid()
		var was unix.Rlimit
		if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 0, Max: unix.RLIM_INFINITY}, &was); err != nil {
			t.Fatalf("prlimit: %v", err)
		}
		waitReady(t, admin, 503, "does not take writes", "disk I/O error")
		if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &was, nil); err != nil {
			t.Fatalf("prlimit: %v", err)
		}
		waitReady(t, admin, 200)
		s.Terminate(t)
	})
}

// The same through serve on PostgreSQL (a database whose transactions turn
// read-only, then a stopped server) and on Redis (a server refusing
// writes for want of replicas, then a stopped one).
func TestReadyzWhenASharedStoreCannotWrite(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		srv := pgtest.Start(t)
		dsn := srv.NewDatabase(t)
		s, admin := startProbing(t, binary, nil, dsn)
		db := strings.TrimSuffix(dsn[strings.LastIndex(dsn, "/")+1:], "?sslmode=disable")
		c, err := pgx.Connect(context.Background(), srv.DSN("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		setMode := func(mode string) {
			t.Helper()
			for _, q := range []string{`ALTER DATABASE "` + db + `" SET default_transaction_read_only = ` + mode,
				`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '` + db + `'`} {
				if _, err := c.Exec(context.Background(), q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
		}
		setMode("on")
		waitReady(t, admin, 503, "does not take writes", "read-only transaction")
		setMode("off")
		waitReady(t, admin, 200)
		if err := srv.Stop(); err != nil {
			t.Fatal(err)
		}
		waitReady(t, admin, 503, "unreachable")
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		waitReady(t, admin, 200)
		s.Terminate(t)
	})

	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		s, admin := startProbing(t, binary, nil, srv.URL())
		srv.Do(t, "CONFIG", "SET", "min-replicas-to-write", "1")
		waitReady(t, admin, 503, "does not take writes", "NOREPLICAS")
		srv.Do(t, "CONFIG", "SET", "min-replicas-to-write", "0")
		waitReady(t, admin, 200)
		srv.Stop(t)
		waitReady(t, admin, 503, "unreachable")
		srv.Start(t)
		waitReady(t, admin, 200)
		s.Terminate(t)
	})
}
