// Package pgbouncertest starts a throwaway PgBouncer in front of a pgtest
// server, for tests of the PostgreSQL store behind a pooler: its own
// temporary directory, 127.0.0.1 at a random free port, pool_mode =
// transaction with a small pool (so that clients share server
// connections), trust authentication, run as an unprivileged user when the
// test runs as root (PgBouncer refuses to run as root). It is stopped by
// its PID when the test ends. When PgBouncer is not installed, tests skip
// (or fail under CI).
package pgbouncertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/hookonce/hookonce/internal/testkit/testenv"
	"github.com/hookonce/hookonce/internal/testkit/unprivileged"
	"github.com/jackc/pgx/v5/pgconn"
)

// Options tune a PgBouncer. The zero value is pool_mode = transaction with
// default_pool_size = 2.
type Options struct {
	// PoolSize is default_pool_size, the server connections per database
	// and user (0: 2).
	PoolSize int
	// Settings are extra [pgbouncer] settings (name = value), or
	// replacements of the defaults.
	Settings map[string]string
}

// Bouncer is one running PgBouncer.
type Bouncer struct {
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// Binary finds the pgbouncer binary: PATH, then the sbin directories
// (Debian installs it as /usr/sbin/pgbouncer, which is not on every
// user's PATH).
func Binary() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer", "/usr/local/bin/pgbouncer"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("pgbouncer is not installed (not on PATH nor in /usr/sbin, /usr/local/sbin)")
}

// Start starts a PgBouncer in front of srv, stopped when the test ends.
func Start(t testing.TB, srv *pgtest.Server, opts Options) *Bouncer {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		testenv.Missing(t, err.Error(), "apt-get install pgbouncer")
	}
	cred := unprivileged.Credential(t)
	b := &Bouncer{dir: unprivileged.Dir(t, cred)}
	if err := os.WriteFile(filepath.Join(b.dir, "userlist.txt"), []byte(`"postgres" ""`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The free port may be taken by someone else before PgBouncer binds it.
	for attempt := 1; ; attempt++ {
		if b.port, err = freePort(); err != nil {
			t.Fatal(err)
		}
		err = b.start(bin, cred, srv.Port(), opts)
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(b.LogTail(), "in use") {
			t.Fatal(err)
		}
	}
	t.Cleanup(b.Stop)
	return b
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgbouncertest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (b *Bouncer) start(bin string, cred *syscall.Credential, pgPort int, opts Options) error {
	pool := opts.PoolSize
	if pool == 0 {
		pool = 2
	}
	settings := map[string]string{
		"listen_addr":       "127.0.0.1",
		"listen_port":       strconv.Itoa(b.port),
		"unix_socket_dir":   "",
		"auth_type":         "trust",
		"auth_file":         filepath.Join(b.dir, "userlist.txt"),
		"admin_users":       "postgres",
		"pool_mode":         "transaction",
		"default_pool_size": strconv.Itoa(pool),
		"max_client_conn":   "1000",
		"logfile":           filepath.Join(b.dir, "pgbouncer.log"),
		// A server restart in a test should not cost PgBouncer's default
		// 15 s of refused logins (docs/stores.md, "PgBouncer").
		"server_login_retry": "1",
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	names := make([]string, 0, len(settings))
	for k := range settings {
		names = append(names, k)
	}
	sort.Strings(names)
	var ini strings.Builder
	fmt.Fprintf(&ini, "[databases]\n* = host=127.0.0.1 port=%d\n\n[pgbouncer]\n", pgPort)
	for _, k := range names {
		fmt.Fprintf(&ini, "%s = %s\n", k, settings[k])
	}
	conf := filepath.Join(b.dir, "pgbouncer.ini")
	if err := os.WriteFile(conf, []byte(ini.String()), 0o644); err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(b.dir, "stderr.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(bin, conf)
	cmd.Dir = b.dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + b.dir}
	cmd.Stdout, cmd.Stderr = log, log
	// If the test binary dies (a panic, a -timeout), take PgBouncer with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	unprivileged.As(cmd, cred)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgbouncertest: start %s: %w", bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	b.cmd, b.done = cmd, done
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-done:
			b.cmd = nil
			return fmt.Errorf("pgbouncertest: pgbouncer exited during start-up:\n%s", b.LogTail())
		default:
		}
		err := b.ping()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			b.Stop()
			return fmt.Errorf("pgbouncertest: pgbouncer not ready after 10s: %v\n%s", err, b.LogTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping connects to the admin console.
func (b *Bouncer) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := pgconn.Connect(ctx, b.DSN("pgbouncer"))
	if err != nil {
		return err
	}
	return c.Close(ctx)
}

// Stop stops PgBouncer (SIGTERM, then SIGKILL) by its PID; safe to call
// twice.
func (b *Bouncer) Stop() {
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
	b.cmd = nil
}

// Port is PgBouncer's TCP port on 127.0.0.1.
func (b *Bouncer) Port() int { return b.port }

// DSN is a connection string for database db through PgBouncer (its admin
// console for db "pgbouncer").
func (b *Bouncer) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", b.port, db)
}

// Via turns a DSN of the server behind PgBouncer (pgtest's) into the same
// DSN through PgBouncer.
func (b *Bouncer) Via(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		panic("pgbouncertest: Via: " + err.Error())
	}
	u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port))
	return u.String()
}

// Show runs SHOW what on the admin console (SHOW POOLS, SHOW SERVERS, …)
// and answers its rows, each as column name → value.
func (b *Bouncer) Show(ctx context.Context, what string) ([]map[string]string, error) {
	c, err := pgconn.Connect(ctx, b.DSN("pgbouncer"))
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	res, err := c.Exec(ctx, "SHOW "+what).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(res) == 0 {
		return nil, nil
	}
	var out []map[string]string
	for _, row := range res[0].Rows {
		m := make(map[string]string, len(row))
		for i, f := range res[0].FieldDescriptions {
			m[f.Name] = string(row[i])
		}
		out = append(out, m)
	}
	return out, nil
}

// LogTail is the end of PgBouncer's log.
func (b *Bouncer) LogTail() string {
	var all []byte
	for _, name := range []string{"stderr.log", "pgbouncer.log"} {
		data, _ := os.ReadFile(filepath.Join(b.dir, name))
		all = append(all, data...)
	}
	if len(all) > 4000 {
		all = all[len(all)-4000:]
	}
	return string(all)
}

// Database makes a new database on the shared PostgreSQL server
// (pgtest.Shared) and returns its DSN through b, with pooler=transaction
// (hookonce's setting for a transaction pooler) and query appended
// ("&name=value…").
func (b *Bouncer) Database(t testing.TB, query string) string {
	t.Helper()
	return b.Via(pgtest.Shared(t).NewDatabase(t)) + "&pooler=transaction" + query
}
