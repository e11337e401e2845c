// Package servetest runs `hookonce serve` for tests: the built binary as a
// process (Build, Options.Bin), or the command line in-process
// (Options.Run, for internal/cli's own tests), on 127.0.0.1:0 in front of
// a counting site (proxy/proxytest.Site), with its stderr kept one log
// line at a time and the addresses it listens on read from its log. It
// also opens the store the server was pointed at (OpenStore), to look at
// records from the test. It is imported by tests only.
package servetest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build builds hookonce into dir with `go build` and the given flags
// (-race, …) under env added to this process's environment, and returns
// the binary's path.
func Build(dir string, env []string, flags ...string) (string, error) {
	bin := filepath.Join(dir, "hookonce")
	args := append(append([]string{"build"}, flags...), "-o", bin, "github.com/hookonce/hookonce")
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build of hookonce: %v\n%s", err, out)
	}
	return bin, nil
}

// Runner runs the command line in-process: args start with "serve", the
// log goes to stderr, and it returns the exit status once ctx is done (as
// SIGTERM would stop the binary).
type Runner func(ctx context.Context, args []string, stderr io.Writer) int

// Options say how to run serve. Exactly one of Bin and Run is set.
type Options struct {
	Bin string // the built binary, run as a process
	Run Runner // the command line in-process (Env, Wrap and Cred do not apply)

	// Args follow serve's own: --listen 127.0.0.1:0 --admin-listen
	// 127.0.0.1:0 --log-format json.
	Args []string
	// Env is the process's whole environment; nil: this process's.
	Env []string
	// Wrap runs the binary through another command (unshare …), which
	// must exec it with the arguments appended, keeping the PID.
	Wrap []string
	Cred *syscall.Credential // run as another user; nil: as this process's
}

// Server is a running (or exited) `hookonce serve`.
type Server struct {
	Addr      string // the proxy's host:port
	URL       string // http://Addr
	AdminAddr string // the admin listener's host:port
	Admin     string // http://AdminAddr

	cmd  *exec.Cmd          // the process; nil in-process
	stop context.CancelFunc // stops the in-process run

	mu    sync.Mutex // guards lines
	lines []line

	done chan struct{} // closed once serve has exited
	err  error         // how it exited, once done is closed
	code int           // its exit status, once done is closed
}

// line is one line of serve's stderr and, when it is JSON, its fields
// (otherwise {"msg": the whole line}).
type line struct {
	text   string
	fields map[string]any
}

func parse(text string) line {
	var m map[string]any
	if json.Unmarshal([]byte(text), &m) != nil {
		m = map[string]any{"msg": text}
	}
	return line{text: text, fields: m}
}

// Start runs serve and waits until both listeners serve.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s := Launch(t, o)
	s.AdminAddr = fmt.Sprint(s.WaitLog(t, "admin listener serving")["listen"])
	s.Addr = fmt.Sprint(s.WaitLog(t, "hookonce serving")["listen"])
	s.Admin, s.URL = "http://"+s.AdminAddr, "http://"+s.Addr
	return s
}

// Launch runs serve and does not wait for it; the test's cleanup kills it
// (SIGKILL; in-process: cancelled) if it still runs.
func Launch(t testing.TB, o Options) *Server {
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--log-format", "json"}, o.Args...)
	s := &Server{done: make(chan struct{})}
	if o.Run != nil {
		s.runInProcess(t, o.Run, args)
		return s
	}
	if o.Bin == "" {
		t.Fatal("servetest: Options without Bin or Run")
	}
	s.cmd = Command(o, args...)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.collect(stderr)
		s.err = s.cmd.Wait()
		s.code = s.cmd.ProcessState.ExitCode()
		close(s.done)
	}()
	t.Cleanup(func() { s.Kill9(t) })
	return s
}

// Command is the binary's command for args (serve's defaults not added),
// with o's environment, wrapper and user; it dies with the test process.
func Command(o Options, args ...string) *exec.Cmd {
	name := o.Bin
	if len(o.Wrap) > 0 {
		name, args = o.Wrap[0], append(append(append([]string(nil), o.Wrap[1:]...), o.Bin), args...)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = o.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: o.Cred}
	dieWithParent(cmd.SysProcAttr)
	return cmd
}

func (s *Server) runInProcess(t testing.TB, run Runner, args []string) {
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	r, w := io.Pipe()
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		s.collect(r)
	}()
	go func() {
		code := run(ctx, args, w)
		w.Close()
		<-collected
		if s.code = code; code != 0 {
			s.err = fmt.Errorf("exit status %d", code)
		}
		close(s.done)
	}()
	t.Cleanup(func() {
		stop()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
		}
	})
}

func (s *Server) collect(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := parse(sc.Text())
		s.mu.Lock()
		s.lines = append(s.lines, l)
		s.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r) // a line past the buffer: keep the pipe flowing
}

// Pid is the process's id (0 in-process).
func (s *Server) Pid() int {
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Find returns the fields of the first stderr line for which match holds.
func (s *Server) Find(match func(text string, fields map[string]any) bool) (map[string]any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if match(l.text, l.fields) {
			return l.fields, true
		}
	}
	return nil, false
}

// Logs returns every stderr line's fields so far.
func (s *Server) Logs() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]map[string]any, len(s.lines))
	for i, l := range s.lines {
		out[i] = l.fields
	}
	return out
}

// CountLog counts the log lines whose msg is msg.
func (s *Server) CountLog(msg string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.lines {
		if l.fields["msg"] == msg {
			n++
		}
	}
	return n
}

// Stderr is what serve wrote to stderr so far.
func (s *Server) Stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	texts := make([]string, len(s.lines))
	for i, l := range s.lines {
		texts[i] = l.text
	}
	return strings.Join(texts, "\n")
}

// Done is closed once serve has exited; Err then says how.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err is how serve exited (nil: status 0), once Done is closed.
func (s *Server) Err() error {
	<-s.done
	return s.err
}

// ExitCode waits for serve to exit and returns its exit status (-1: killed
// by a signal).
func (s *Server) ExitCode() int {
	<-s.done
	return s.code
}

// Exited tells whether serve has exited.
func (s *Server) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// WaitLog waits up to 20s for a log line whose msg is msg (a JSON line's
// msg, or a plain line as a whole) and returns its fields, failing the
// test if serve exits first.
func (s *Server) WaitLog(t testing.TB, msg string) map[string]any {
	t.Helper()
	return s.WaitLogWithin(t, msg, 20*time.Second)
}

// WaitLogWithin is WaitLog waiting up to within.
func (s *Server) WaitLogWithin(t testing.TB, msg string, within time.Duration) map[string]any {
	t.Helper()
	is := func(_ string, l map[string]any) bool { return l["msg"] == msg }
	deadline := time.Now().Add(within)
	for {
		if l, ok := s.Find(is); ok {
			return l
		}
		if s.Exited() {
			// The collector has read the pipe to its end: look once more.
			if l, ok := s.Find(is); ok {
				return l
			}
			t.Fatalf("hookonce serve exited (%v) before logging %q:\n%s", s.err, msg, s.Stderr())
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line %q within %v:\n%s", msg, within, s.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Signal sends sig to the process (in-process: only SIGTERM, as a cancel).
func (s *Server) Signal(sig syscall.Signal) error {
	if s.cmd == nil {
		if sig != syscall.SIGTERM {
			return errors.New("servetest: an in-process serve takes no signal but SIGTERM")
		}
		s.stop()
		return nil
	}
	return s.cmd.Process.Signal(sig)
}

// Terminate stops serve as SIGTERM does and fails the test unless it
// exits with status 0 within 15s.
func (s *Server) Terminate(t testing.TB) {
	t.Helper()
	if err := s.Signal(syscall.SIGTERM); err != nil && !s.Exited() {
		t.Fatal(err)
	}
	select {
	case <-s.done:
		if s.err != nil {
			t.Errorf("hookonce serve exited with %v when stopped:\n%s", s.err, s.Stderr())
		}
	case <-time.After(15 * time.Second):
		t.Errorf("hookonce serve did not stop within 15s")
	}
}

// Kill9 kills the process with SIGKILL and waits for it (in-process:
// cancels it); a no-op once it has exited.
func (s *Server) Kill9(t testing.TB) {
	t.Helper()
	if s.Exited() {
		return
	}
	if s.cmd == nil {
		s.stop()
	} else {
		_ = syscall.Kill(s.Pid(), syscall.SIGKILL)
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Errorf("hookonce serve (pid %d) did not die within 10s", s.Pid())
	}
}

// Metrics scrapes the admin listener's /metrics.
func (s *Server) Metrics(t testing.TB) string {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(s.Admin + "/metrics")
	if err != nil {
		t.Fatalf("scrape metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape metrics: %d %s", resp.StatusCode, b)
	}
	return string(b)
}
