package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// The end-to-end tests of this package run the command line in-process:
// hookonce runs one command through the app as the binary would, and
// startServe runs `hookonce serve` (flags, env, Validate, Main) on
// 127.0.0.1:0 until the test stops it. Signals, exit statuses and the
// built binary are tested in the root package.

// hookonce runs a one-shot command and returns stdout, stderr, exit code.
func hookonce(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr strings.Builder
	code := run(newApp("dev", &stdout, &stderr), append([]string{"hookonce"}, args...), &stderr)
	return stdout.String(), stderr.String(), code
}

// server is a `hookonce serve` running in-process.
type server struct {
	addr   string
	stop   context.CancelFunc
	exit   chan int
	done   chan struct{} // closed when serve returned
	stderr *logLines
}

// logLines keeps serve's stderr, one JSON log line each.
type logLines struct {
	mu   sync.Mutex
	buf  []byte
	logs []map[string]any
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := l.buf[:i]
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			m = map[string]any{"msg": string(line)}
		}
		l.logs = append(l.logs, m)
		l.buf = l.buf[i+1:]
	}
}

func (s *server) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		s.stderr.mu.Lock()
		for _, l := range s.stderr.logs {
			if l["msg"] == msg {
				s.stderr.mu.Unlock()
				return l
			}
		}
		s.stderr.mu.Unlock()
		select {
		case code := <-s.exit:
			t.Fatalf("serve exited %d before logging %q", code, msg)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no log line %q in time", msg)
	return nil
}

// terminate stops serve as SIGTERM does and fails the test unless it
// exits cleanly within 10s.
func (s *server) terminate(t *testing.T) {
	t.Helper()
	s.stop()
	select {
	case code := <-s.exit:
		if code != exitOK {
			t.Fatalf("serve exited %d when stopped", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
}

func startServe(t *testing.T, args ...string) *server {
	t.Helper()
	args = append([]string{"hookonce", "serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--log-format", "json"}, args...)
	ctx, stop := context.WithCancel(context.Background())
	s := &server{stop: stop, exit: make(chan int, 1), done: make(chan struct{}), stderr: &logLines{}}
	go func() {
		defer close(s.done)
		app := newApp("dev", os.Stdout, s.stderr)
		s.exit <- exitCode(app.RunContext(ctx, args))
	}()
	t.Cleanup(func() {
		stop()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
		}
	})
	s.addr = s.waitLog(t, "hookonce serving")["listen"].(string)
	return s
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
