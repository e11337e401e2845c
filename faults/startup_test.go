package faults_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/servetest"
)

// An unreadable or corrupt SQLite file at start: `hookonce serve` exits 1
// with an error that names the store and the reason, and never panics or
// starts serving on it.
func TestServeRefusesABadDatabase(t *testing.T) {
	needBinary(t)
	// Expected, written down before the run: every case exits 1 and says
	// "open store" (or "migrate store") and the reason.
	cases := []struct {
		name    string
		prepare func(t *testing.T, path string) *syscall.Credential
		reason  []string // any of these in stderr
	}{
		{"NotADatabase", func(t *testing.T, path string) *syscall.Credential {
			writeBytes(t, path, bytes.Repeat([]byte("this is not an SQLite database\n"), 2000))
			return nil
		}, []string{"file is not a database"}},
		{"CorruptHeader", func(t *testing.T, path string) *syscall.Credential {
			b := validDatabase(t, path)
			copy(b[16:24], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // page size, versions, reserved bytes
			writeBytes(t, path, b)
			return nil
		}, []string{"file is not a database", "malformed"}},
		{"CorruptSchemaPage", func(t *testing.T, path string) *syscall.Credential {
			b := validDatabase(t, path)
			for i := 100; i < 4096 && i < len(b); i++ { // page 1 past the header: the schema
				b[i] = 0xA5
			}
			writeBytes(t, path, b)
			return nil
		}, []string{"malformed", "file is not a database"}},
		{"Truncated", func(t *testing.T, path string) *syscall.Credential {
			b := validDatabase(t, path)
			writeBytes(t, path, b[:len(b)/2+100])
			return nil
		}, []string{"malformed", "file is not a database", "disk I/O error"}},
		{"Directory", func(t *testing.T, path string) *syscall.Credential {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
			return nil
		}, []string{"unable to open", "is a directory", "out of memory"}},
		{"Unreadable", func(t *testing.T, path string) *syscall.Credential {
			validDatabase(t, path)
			if err := os.Chmod(path, 0o000); err != nil {
				t.Fatal(err)
			}
			if os.Geteuid() != 0 {
				return nil
			}
			// Root reads any file: run serve as an unprivileged user.
			u, err := user.Lookup("nobody")
			if err != nil {
				t.Skip("running as root and no user nobody to be refused as")
			}
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		}, []string{"unable to open", "permission denied", "readonly", "read-only"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "hookonce-baddb-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			_ = os.Chmod(dir, 0o755)
			path := filepath.Join(dir, "hookonce.db")
			cred := c.prepare(t, path)
			if cred != nil {
				// The binary's directory must be reachable for that user.
				_ = os.Chmod(filepath.Dir(binary), 0o755)
			}
			code, stderr := runToExit(t, serveOpts{store: "sqlite:" + path, upstream: "http://127.0.0.1:1",
				config: "senders: []\n", cred: cred, dir: dir}, 20*time.Second)
			t.Logf("exit %d: %s", code, strings.TrimSpace(lastLine(stderr)))
			if code != 1 {
				t.Errorf("exit code %d, want 1; stderr:\n%s", code, stderr)
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") {
				t.Errorf("serve panicked:\n%s", stderr)
			}
			if !strings.Contains(stderr, "open store") && !strings.Contains(stderr, "migrate store") {
				t.Errorf("the error does not say it is the store: %s", lastLine(stderr))
			}
			found := false
			for _, r := range c.reason {
				found = found || strings.Contains(strings.ToLower(stderr), strings.ToLower(r))
			}
			if !found {
				t.Errorf("the error gives none of the reasons %q: %s", c.reason, lastLine(stderr))
			}
		})
	}
}

// validDatabase creates a migrated store at path with a few records, closes
// it, and returns the file's bytes (checkpointed: no WAL left beside it).
func validDatabase(t *testing.T, path string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := servetest.OpenStore(t, "sqlite:"+path)
	for _, k := range []string{"a", "b", "c"} {
		if _, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: "shop", Key: k, PayloadHash: "h", Owner: "o", Lease: time.Minute, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, "shop", k, "o", dedupe.Response{Status: 200, Body: bytes.Repeat([]byte("x"), 3000)}, dedupe.Attempt{At: time.Now(), By: dedupe.AttemptBySender, Outcome: "complete"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Fatalf("%s-wal is left after Close: the file alone is not the database", path)
	}
	return b
}

func writeBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runToExit runs `hookonce serve` and waits for it to exit; one that
// serves instead is killed and fails the test.
func runToExit(t *testing.T, o serveOpts, within time.Duration) (int, string) {
	t.Helper()
	s := launch(t, o)
	select {
	case <-s.Done():
		return s.ExitCode(), s.Stderr()
	case <-time.After(within):
		s.Kill9(t)
		t.Fatalf("serve did not exit within %v (it serves on a bad database?):\n%s", within, s.Stderr())
		return 0, ""
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// Damage past the pages that opening reads (here page 2, the records
// table's root) is not seen at start: serve starts. Expected, written down
// before the run: it fails closed — every delivery that reads the damaged
// page is refused with 503 and never reaches the site —, integrity_check
// names the damage, and the store's background quick_check makes /readyz
// fail saying the file is damaged.
func TestServeOnACorruptDataPageFailsClosed(t *testing.T) {
	needBinary(t)
	const (
		deliveries = 4 // new events, each delivered twice
		siteCalls  = 0
	)
	dir := t.TempDir()
	path := filepath.Join(dir, "hookonce.db")
	b := validDatabase(t, path)
	for i := 4096; i < 2*4096 && i < len(b); i++ {
		b[i] = 0xA5
	}
	writeBytes(t, path, b)
	if got := integrityCheck(t, path); got == "ok" {
		t.Fatalf("integrity_check passes the damaged file")
	} else {
		t.Logf("integrity_check: %.200s", got)
	}
	s := newSite(t, nil)
	p := startServe(t, serveOpts{store: "sqlite:" + path, upstream: s.URL, config: diskConfig})
	client := newClient(t, 10*time.Second)
	statuses := map[int]int{}
	for i := range deliveries {
		for range 2 {
			r := post(client, p.URL+"/hooks/shop", evt(strconv.Itoa(i)))
			statuses[r.status]++
			if r.status != 503 {
				t.Errorf("event %d on a damaged records page: %s; want 503", i, r)
			}
		}
	}
	t.Logf("answers: %s; site calls %d (want %d)", histogram(statuses), s.Total(), siteCalls)
	if s.Total() != siteCalls {
		t.Errorf("the site ran %d times on a damaged store", s.Total())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get(p.Admin + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), "damaged") {
				t.Logf("/readyz: %.300s", body)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz on a damaged file: %d %.300s; want 503 saying it is damaged", resp.StatusCode, body)
			}
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.Terminate(t)
}
