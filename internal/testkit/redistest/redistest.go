// Package redistest starts throwaway redis-server processes for tests: loopback
// only, a random free port, no persistence, a temporary directory, stopped by
// PID when the test (or the test binary) ends.
//
// It never touches a Redis it did not start. When redis-server is not
// installed, tests are skipped with a message, except under CI=true, where a
// missing server is a failure (the CI script installs it).
package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/testenv"
)

// Server is one redis-server process started by this package.
type Server struct {
	// Addr is 127.0.0.1:port; it stays the same across Stop and Start.
	Addr string
	port int
	dir  string
	bin  string
	args []string // extra redis-server arguments, kept for restarts
	conf string   // config file given first on the command line (a sentinel's); "" none

	mu   sync.Mutex    // guards cmd and done
	cmd  *exec.Cmd     // nil while stopped
	done chan struct{} // closed when cmd has exited
}

// Binary returns the redis-server path, or skips (fails under CI=true) when
// there is none.
func Binary(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Missing(tb, fmt.Sprintf("redis-server not found: %v", err), "apt-get install redis-server, or run .ci/run")
	}
	return bin
}

// Start runs a fresh redis-server for tb and stops it in tb's cleanup. Extra
// arguments are appended to the command line (and win over the defaults),
// e.g. "--appendonly", "yes", "--appendfsync", "everysec" for a benchmark
// with the persistence production would use.
func Start(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	s, err := start(Binary(tb), tb.TempDir(), extra...)
	if err != nil {
		tb.Fatalf("start redis-server: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

func start(bin, dir string, extra ...string) (*Server, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ { // a free port can be taken between probe and bind
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), port: port, dir: dir, bin: bin, args: extra}
		if lastErr = s.launch(); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// URL is the redis:// URL of the server (database 0).
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Port is the TCP port the server listens on.
func (s *Server) Port() int { return s.port }

// PID is the server's process id, 0 while stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// launch starts the process on s.port and waits until it answers PING.
func (s *Server) launch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("redis-server on %s already running", s.Addr)
	}
	logPath := filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", s.port))
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", logPath,
		"--daemonize", "no",
	}
	if s.conf != "" {
		args = append([]string{s.conf}, args...)
	}
	cmd := exec.Command(s.bin, append(args, s.args...)...)
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("exec %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(s.Addr) == nil {
			s.cmd, s.done = cmd, done
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server on port %d exited at start (log: %s)", s.port, tail(logPath))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("redis-server on port %d did not answer PING in 10s (log: %s)", s.port, tail(logPath))
		}
	}
}

// Stop kills the server (SIGKILL by PID, as a crash would) and waits for it to
// exit. The port stays reserved for Start. Stopping a stopped server is a no-op.
func (s *Server) Stop(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGCONT) // in case it was paused
	if err := cmd.Process.Kill(); err != nil {
		tb.Logf("kill redis-server pid %d: %v", cmd.Process.Pid, err)
	}
	<-done
}

// Start runs the server again on the same port and arguments: with the
// defaults (no persistence) the dataset is empty; with --appendonly yes it is
// what the append-only file kept. It fails tb if the port cannot be bound
// again.
func (s *Server) Start(tb testing.TB) {
	tb.Helper()
	var err error
	for i := 0; i < 50; i++ { // the old socket may linger for a moment
		if err = s.launch(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("restart redis-server on %s: %v", s.Addr, err)
}

// Pause freezes the server (SIGSTOP): connections stay open but nothing is
// answered, as with a hung or overloaded Redis. Resume undoes it.
func (s *Server) Pause(tb testing.TB) { tb.Helper(); s.signal(tb, syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume(tb testing.TB) { tb.Helper(); s.signal(tb, syscall.SIGCONT) }

func (s *Server) signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	pid := s.PID()
	if pid == 0 {
		tb.Fatalf("redis-server on %s is not running", s.Addr)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		tb.Fatalf("signal %v to redis-server pid %d: %v", sig, pid, err)
	}
}

// Close stops the server; safe to call twice. Used as the cleanup of Start.
func (s *Server) Close() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
	_ = cmd.Process.Kill()
	<-done
}

// Do sends one command (inline protocol, no quoting) and returns the first
// reply line, e.g. Do(t, "FLUSHALL") → "+OK".
func (s *Server) Do(tb testing.TB, args ...string) string {
	tb.Helper()
	line, err := command(s.Addr, strings.Join(args, " "))
	if err != nil {
		tb.Fatalf("redis %s: %v", args[0], err)
	}
	return line
}

// FlushAll empties every database of the server.
func (s *Server) FlushAll(tb testing.TB) {
	tb.Helper()
	if got := s.Do(tb, "FLUSHALL"); got != "+OK" {
		tb.Fatalf("FLUSHALL = %q", got)
	}
}

func ping(addr string) error {
	line, err := command(addr, "PING")
	if err != nil {
		return err
	}
	if line != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// command sends one inline command and returns its one-line reply.
func command(addr, cmd string) (string, error) {
	var line string
	err := roundTrip(addr, cmd, func(rd *bufio.Reader) (err error) {
		line, err = rd.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		return err
	})
	return line, err
}

// roundTrip dials addr, sends one inline command and lets read parse the
// reply, all under a short deadline.
func roundTrip(addr, cmd string, read func(*bufio.Reader) error) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		return err
	}
	return read(bufio.NewReader(c))
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// shared is the one server of a test package, started on first use by Shared
// and stopped by Main.
var shared struct {
	once sync.Once
	srv  *Server
	err  error
	dir  string
}

// Shared returns the package's shared server, starting it on first use. The
// package's TestMain must call Main so that it is stopped when tests end
// (it also dies with the test binary, by a parent-death signal on Linux).
// Tests keep apart by key (unique sender names) or call FlushAll.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	bin := Binary(tb)
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "redistest-")
		if shared.err == nil {
			shared.srv, shared.err = start(bin, shared.dir)
		}
	})
	if shared.err != nil {
		tb.Fatalf("start shared redis-server: %v", shared.err)
	}
	return shared.srv
}

// Main runs the package's tests and then stops the shared server:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
func Main(m interface{ Run() int }) {
	code := m.Run()
	if shared.srv != nil {
		shared.srv.Close()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// StartCluster runs a one-node Redis Cluster holding every slot. One node is
// enough to exercise what Cluster changes for a client: the server refuses
// a script or transaction whose keys hash to different slots (CROSSSLOT).
// ClusterURL names it.
func StartCluster(tb testing.TB) *Server {
	tb.Helper()
	s := Start(tb, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	if got := s.Do(tb, "CLUSTER", "ADDSLOTSRANGE", "0", "16383"); got != "+OK" {
		tb.Fatalf("CLUSTER ADDSLOTSRANGE = %q", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// CLUSTER INFO is a bulk reply; read it whole.
		info, err := bulk(s.Addr, "CLUSTER INFO")
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return s
		}
		if time.Now().After(deadline) {
			tb.Fatalf("one-node cluster on %s not ok after 10s: %v %q", s.Addr, err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ClusterURL is the redis+cluster:// URL of a server from StartCluster.
func (s *Server) ClusterURL() string { return "redis+cluster://" + s.Addr }

// bulk sends one command and reads a bulk-string reply.
func bulk(addr, cmd string) (string, error) {
	var out string
	err := roundTrip(addr, cmd, func(rd *bufio.Reader) error {
		head, err := rd.ReadString('\n')
		if err != nil {
			return err
		}
		head = strings.TrimRight(head, "\r\n")
		n, err := strconv.Atoi(strings.TrimPrefix(head, "$"))
		if !strings.HasPrefix(head, "$") || err != nil || n < 0 {
			return fmt.Errorf("%s: reply %q", cmd, head)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return err
		}
		out = string(buf[:n])
		return nil
	})
	return out, err
}
