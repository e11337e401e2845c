// Package pgtest starts a throwaway PostgreSQL server for tests: initdb in a
// temporary directory, postgres on 127.0.0.1 at a random free port, run as an
// unprivileged user when the test runs as root. It needs nothing set up by
// hand; when the binaries are missing, tests skip (or fail under CI).
//
// It must never touch a cluster it did not create: every server lives in its
// own temporary directory and is stopped by its PID.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/testenv"
	"github.com/jackc/pgx/v5/pgconn"
)

// Options tune a server. The zero value is a fast, non-durable server for
// tests (fsync off).
type Options struct {
	// Durable keeps fsync and full_page_writes on, for benchmarks whose
	// numbers should mean something. (A crash of the server process alone
	// loses nothing either way: commits reach the OS before they are
	// acknowledged.)
	Durable bool
	// Settings are extra postgres -c name=value settings.
	Settings map[string]string
}

// Server is one throwaway PostgreSQL cluster.
type Server struct {
	bin  string // directory holding initdb and postgres
	dir  string // temporary root, removed by Close
	data string
	port int
	opts Options
	cred *syscall.Credential // nil when not running as root

	mu   sync.Mutex // guards cmd and done
	cmd  *exec.Cmd  // the running postmaster; nil when stopped
	done chan struct{}

	dbSeq atomic.Int64
}

// BinDir finds the directory of the PostgreSQL server binaries: PATH first,
// then /usr/lib/postgresql/*/bin (newest version first).
func BinDir() (string, error) {
	if p, err := exec.LookPath("postgres"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
				return d, nil
			}
		}
	}
	return "", errors.New("pgtest: PostgreSQL server binaries (postgres, initdb) not found on PATH or in /usr/lib/postgresql/*/bin")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// StartServer creates and starts a cluster. The caller must Close it.
func StartServer(opts Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: temp dir: %w", err)
	}
	s := &Server{bin: bin, dir: dir, data: filepath.Join(dir, "data"), opts: opts}
	if os.Geteuid() == 0 {
		if s.cred, err = unprivileged(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: chown %s: %w", dir, err)
		}
	}
	if err := s.initdb(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.startOnFreePort(); err != nil {
		return nil, err
	}
	return s, nil
}

// startOnFreePort starts a server made in s.dir on a free port. The port
// may be taken by someone else before postgres binds it: it tries another
// (restarts after Stop keep theirs, as DSNs are handed out). On failure
// the server is closed and its directory removed.
func (s *Server) startOnFreePort() error {
	for attempt := 1; ; attempt++ {
		var err error
		if s.port, err = freePort(); err != nil {
			os.RemoveAll(s.dir)
			return err
		}
		err = s.Start()
		if err == nil {
			return nil
		}
		if attempt == 3 || !strings.Contains(s.logTail(), "already in use") {
			s.Close()
			return err
		}
	}
}

// unprivileged returns the credential of the "postgres" user (postgres
// refuses to run as root).
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("pgtest: running as root and no unprivileged user (postgres, nobody) to run PostgreSQL as")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = []string{"PATH=" + s.bin + ":/usr/bin:/bin", "LC_ALL=C", "HOME=" + s.dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	return cmd
}

func (s *Server) initdb() error {
	cmd := s.command("initdb", "-D", s.data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	return nil
}

// Port is the TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// Dir is the server's temporary directory (the log is Dir()/postgres.log).
func (s *Server) Dir() string { return s.dir }

// DSN returns a connection string for database db.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Start starts the postmaster (again, after Stop) on the same port and data
// directory, and waits until it accepts connections.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	settings := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"unix_socket_directories": "",
		"max_connections":         "200",
		"shared_buffers":          "64MB",
		"log_min_messages":        "warning",
		"log_checkpoints":         "off",
	}
	if !s.opts.Durable {
		settings["fsync"] = "off"
		settings["full_page_writes"] = "off"
		// synchronous_commit stays on: with it off, Stop (a crash) loses
		// acknowledged commits, which outage tests must not see.
	}
	for k, v := range s.opts.Settings {
		settings[k] = v
	}
	args := []string{"-D", s.data, "-p", strconv.Itoa(s.port)}
	names := make([]string, 0, len(settings))
	for k := range settings {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		args = append(args, "-c", k+"="+settings[k])
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: log: %w", err)
	}
	defer log.Close()
	cmd := s.command("postgres", args...)
	cmd.Stdout, cmd.Stderr = log, log
	// If the test binary dies (a panic, a -timeout), take the server with it.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done

	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("pgtest: postgres exited during start-up:\n%s", s.logTail())
		default:
		}
		if err := s.ping(); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres not ready after 30s: %v\n%s", err, s.logTail())
		}
		time.Sleep(30 * time.Millisecond)
	}
}

func (s *Server) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := pgconn.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	return c.Close(ctx)
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Stop shuts the server down at once (immediate mode, like a crash; the
// next Start runs recovery). The data directory is kept.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	pid := s.cmd.Process.Pid
	s.signalTree(pid, syscall.SIGCONT) // a paused server cannot shut down
	_ = syscall.Kill(pid, syscall.SIGQUIT)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		for _, c := range children(pid) {
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		<-s.done
	}
	s.cmd = nil
	return nil
}

// Pause freezes the postmaster and every process it started (SIGSTOP), as a
// hung database host would look: connections stay open, nothing answers.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume undoes Pause.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("pgtest: server not running")
	}
	s.signalTree(s.cmd.Process.Pid, sig)
	return nil
}

// signalTree signals the postmaster and its children. Backends call setsid,
// so a process-group signal would miss them. On SIGSTOP the postmaster goes
// first (it forks no new child once stopped); on SIGCONT it goes last.
func (s *Server) signalTree(pid int, sig syscall.Signal) {
	if sig != syscall.SIGCONT {
		_ = syscall.Kill(pid, sig)
	}
	for _, c := range children(pid) {
		_ = syscall.Kill(c, sig)
	}
	if sig == syscall.SIGCONT {
		_ = syscall.Kill(pid, sig)
	}
}

// children lists the PIDs whose parent is pid, from /proc.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 {
			if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
				out = append(out, n)
			}
		}
	}
	return out
}

// Close stops the server and removes its directory; safe to call twice.
func (s *Server) Close() error {
	err := s.Stop()
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
	return err
}

// CreateDatabase creates a fresh, empty database and returns its DSN.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	c, err := pgconn.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgtest: connect: %w", err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, `CREATE DATABASE "`+strings.ReplaceAll(name, `"`, `""`)+`"`).ReadAll(); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return s.DSN(name), nil
}

// NewDatabase creates a fresh database for one test and returns its DSN.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn, err := s.CreateDatabase(ctx, fmt.Sprintf("t%d_%d", os.Getpid(), s.dbSeq.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// Start starts a server of the test's own, closed when the test ends. Use it
// for tests that stop or pause the server; others share one via Shared.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	skipWithoutBinaries(t)
	s, err := StartServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// skipWithoutBinaries skips the test when PostgreSQL is not installed, unless
// the environment says CI (where a missing server is a broken image).
func skipWithoutBinaries(t testing.TB) {
	t.Helper()
	if _, err := BinDir(); err != nil {
		testenv.Missing(t, err.Error(), "apt-get install postgresql")
	}
}

var shared struct {
	mu      sync.Mutex
	srv     *Server
	err     error
	managed bool // Main is in charge of closing srv
}

// Main runs a test package's tests and closes the shared server afterwards:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
func Main(m interface{ Run() int }) int {
	shared.mu.Lock()
	shared.managed = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		shared.srv.Close()
		shared.srv = nil
	}
	return code
}

// Shared returns the package's shared server, started on first use. Without
// Main in TestMain, each caller gets a server of its own (closed with the
// test) so that nothing outlives the test binary.
func Shared(t testing.TB) *Server {
	t.Helper()
	skipWithoutBinaries(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.managed {
		shared.mu.Unlock()
		defer shared.mu.Lock()
		return Start(t)
	}
	if shared.srv == nil && shared.err == nil {
		shared.srv, shared.err = StartServer(Options{})
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv
}
