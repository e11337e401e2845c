package admin_test

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/sqlite"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// probeCounter is a real store that counts its write probes.
type probeCounter struct {
	dedupe.Store
	probes atomic.Int64
}

func (p *probeCounter) Probe(ctx context.Context) error {
	p.probes.Add(1)
	return p.Store.Probe(ctx)
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// /readyz writes to the store (at most once per ProbeInterval, however
// often it is asked) and turns 503, with the reason, when the store answers
// but does not take writes: here an SQLite file whose write lock another
// connection holds.
func TestReadyzProbesWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookonce.db")
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	store := &probeCounter{Store: s}
	clock := &fakeClock{now: time.Now()}
	logs := &proxytest.SyncBuffer{}
	const interval = 5 * time.Second
	h, err := admin.New(admin.Options{Store: store, Token: testToken, Now: clock.Now, ProbeInterval: interval,
		ReadyTimeout: 300 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	readyz := func(token string) reply { return do(t, http.MethodGet, srv.URL+"/readyz", token) }

	t.Run("one probe per interval", func(t *testing.T) {
		for i := 0; i < 5; i++ {
			if r := readyz(""); r.status != http.StatusOK {
				t.Fatalf("readyz: %d %s", r.status, r.body)
			}
		}
		if n := store.probes.Load(); n != 1 {
			t.Fatalf("%d probes for 5 /readyz checks within the interval, want 1", n)
		}
		clock.Advance(interval)
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r := readyz(""); r.status != http.StatusOK {
					t.Errorf("readyz: %d %s", r.status, r.body)
				}
			}()
		}
		wg.Wait()
		if n := store.probes.Load(); n != 2 {
			t.Fatalf("%d probes after 20 concurrent checks in a new interval, want 2", n)
		}
	})

	// Another connection takes the write lock and keeps it.
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	t.Run("the cached result holds until the interval ends", func(t *testing.T) {
		if r := readyz(""); r.status != http.StatusOK {
			t.Fatalf("readyz within the interval of a good probe: %d", r.status)
		}
	})

	t.Run("503 when writes fail", func(t *testing.T) {
		clock.Advance(interval)
		r := readyz("")
		if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "does not take writes") {
			t.Fatalf("readyz with the write lock taken: %d %s", r.status, r.body)
		}
		if strings.Contains(string(r.body), "probe") || r.header.Get("Retry-After") == "" {
			t.Fatalf("unauthenticated 503 shows the store's error or lacks Retry-After: %v %s", r.header, r.body)
		}
		// With the token the reason includes the store's error; the failed
		// probe is cached too: no new write for the interval.
		r = readyz(testToken)
		if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "probe") {
			t.Fatalf("readyz with the token: %d %s", r.status, r.body)
		}
		if n := store.probes.Load(); n != 3 {
			t.Fatalf("%d probes, want 3", n)
		}
		if !strings.Contains(logs.String(), "does not take writes") {
			t.Fatalf("the failed probe is not logged:\n%s", logs)
		}
	})

	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}

	t.Run("ready again once writes pass", func(t *testing.T) {
		if r := readyz(""); r.status != http.StatusServiceUnavailable {
			t.Fatalf("readyz within the interval of a failed probe: %d", r.status)
		}
		clock.Advance(interval)
		if r := readyz(""); r.status != http.StatusOK {
			t.Fatalf("readyz after the lock went: %d %s", r.status, r.body)
		}
		if !strings.Contains(logs.String(), "takes writes again") {
			t.Fatalf("the recovery is not logged:\n%s", logs)
		}
	})
}
