package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
)

// The unix:// form redis.Open documents reaches Redis over its socket,
// for serve and for the read-only commands.
func TestOpenStoreRoutesUnixRedis(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "redis.sock")
	redistest.Start(t, "--unixsocket", sock, "--unixsocketperm", "700")
	dsn := "unix://" + sock
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := openStore(ctx, dsn, readWrite)
	if err != nil {
		t.Fatalf("openStore %s: %v", dsn, err)
	}
	defer s.Close()
	if _, ok := s.(dedupe.Migrator); ok {
		t.Error("the redis store claims a schema to migrate")
	}
	ro, err := openStore(ctx, dsn, readOnly)
	if err != nil {
		t.Fatalf("openStore %s read-only: %v", dsn, err)
	}
	defer ro.Close()
	if _, err := ro.Get(ctx, "shop", "none"); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("Get over the socket: %v, want ErrNotFound", err)
	}
	if _, errOut, code := hookonce(t, "purge", "--store", dsn); code != exitOK {
		t.Fatalf("purge --store %s: exit %d %s", dsn, code, errOut)
	}
}

// Open means connect and migrate for every backend that has a schema.
func TestOpenStoreMigrates(t *testing.T) {
	ctx := context.Background()
	s, err := openStore(ctx, "sqlite:"+filepath.Join(t.TempDir(), "h.db"), readWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping right after Open: %v", err)
	}
	if m, ok := s.(dedupe.Migrator); !ok {
		t.Fatal("the sqlite store is no dedupe.Migrator")
	} else if err := m.Migrate(ctx); err != nil {
		t.Fatalf("Migrate after Open: %v", err)
	}
	if _, err := openStore(ctx, "mysql://db/x", readWrite); err == nil || !strings.Contains(err.Error(), "unknown store") {
		t.Fatalf("mysql://: %v, want unknown store", err)
	}
}

// sqlite:PATH?synchronous=normal opens PATH itself (not a file named with
// the parameter), for serve and for the read-only commands, and a
// misspelt parameter is refused before any file is made.
func TestOpenStoreSQLiteSynchronous(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "h.db")
	s, err := openStore(ctx, "sqlite:"+path+"?synchronous=normal", readWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the store's file: %v", err)
	}
	ro, err := openStore(ctx, "sqlite:"+path+"?synchronous=normal", readOnly)
	if err != nil {
		t.Fatalf("read-only: %v", err)
	}
	ro.Close()
	bad := filepath.Join(dir, "other.db")
	if _, err := openStore(ctx, "sqlite:"+bad+"?synchronus=normal", readWrite); err == nil || !strings.Contains(err.Error(), "unknown parameter") {
		t.Fatalf("a misspelt parameter: %v, want unknown parameter", err)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "other*")); len(names) != 0 {
		t.Errorf("a refused DSN made files: %v", names)
	}
}

// purgeStore answers Purge from a script of batch sizes.
type purgeStore struct {
	dedupe.Store
	batches []int
	calls   int
	fail    error
	cursors []*dedupe.PurgeCursor // each call's req.Cursor
	seen    []dedupe.PurgeCursor  // and where it stood
	took    time.Duration         // each call's time
}

func (p *purgeStore) Purge(ctx context.Context, req dedupe.PurgeRequest) (int, error) {
	time.Sleep(p.took)
	p.cursors = append(p.cursors, req.Cursor)
	if req.Cursor != nil {
		p.seen = append(p.seen, *req.Cursor)
		req.Cursor.Records = time.Unix(int64(len(p.seen)), 0) // as a store advances it
	}
	if p.calls == len(p.batches) {
		return 0, p.fail
	}
	n := p.batches[p.calls]
	p.calls++
	return n, nil
}

// One purge loop for serve and the purge command: full batches are
// followed by another call, a short one ends it, an error stops it with
// the count so far.
func TestPurgeBatches(t *testing.T) {
	ctx := context.Background()
	p := &purgeStore{batches: []int{10, 10, 3}}
	if n, err := purgeBatches(ctx, p, dedupe.PurgeRequest{Limit: 10}, time.Second, 0); n != 23 || err != nil || p.calls != 3 {
		t.Fatalf("purged %d in %d calls (%v), want 23 in 3", n, p.calls, err)
	}
	// One cursor through a run, a new one for the next run: what a run
	// passed over is found by the next.
	if p.cursors[0] == nil || p.cursors[1] != p.cursors[0] || p.cursors[2] != p.cursors[0] ||
		!p.seen[0].Records.IsZero() || !p.seen[2].Records.Equal(time.Unix(2, 0)) {
		t.Fatalf("one run's cursors %v at %v, want one, from the start, advanced by each call", p.cursors, p.seen)
	}
	first := p.cursors[0]
	p.calls, p.cursors, p.seen = 0, nil, nil
	if _, err := purgeBatches(ctx, p, dedupe.PurgeRequest{Limit: 10, Cursor: first}, 0, 0); err != nil {
		t.Fatal(err)
	}
	if p.cursors[0] == first || !p.seen[0].Records.IsZero() {
		t.Fatalf("second run's cursor %p at %v, want a new one from the start (the first run's was %p)", p.cursors[0], p.seen[0], first)
	}
	p = &purgeStore{batches: []int{10, 10}, fail: dedupe.ErrUnavailable}
	if n, err := purgeBatches(ctx, p, dedupe.PurgeRequest{Limit: 10}, 0, 0); n != 20 || !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("purged %d (%v), want 20 and the failure", n, err)
	}
	p = &purgeStore{batches: []int{7}}
	if n, err := purgeBatches(ctx, p, dedupe.PurgeRequest{}, 0, 0); n != 7 || err != nil || p.calls != 1 {
		t.Fatalf("unbounded purge: %d in %d calls (%v), want 7 in 1", n, p.calls, err)
	}
}

// serve's background purge pauses after each full batch, so that deleting
// takes its duty of the time; none after the last (short) batch, and a
// shutdown during a pause ends the run at once with what was removed.
func TestPurgeBatchesPaced(t *testing.T) {
	for _, c := range []struct {
		busy time.Duration
		duty float64
		want time.Duration
	}{
		{10 * time.Millisecond, 0.3, 23333333 * time.Nanosecond},
		{10 * time.Millisecond, 0.5, 10 * time.Millisecond},
		{10 * time.Millisecond, 0, 0},
		{10 * time.Millisecond, 1, 0},
	} {
		if got := purgePause(c.busy, c.duty); got != c.want {
			t.Errorf("purgePause(%v, %v) = %v, want %v", c.busy, c.duty, got, c.want)
		}
	}
	// Three calls of 20 ms, two pauses of at least 20 ms each at a duty of
	// 0.5: at least 100 ms in all (a timer never fires early).
	p := &purgeStore{batches: []int{10, 10, 3}, took: 20 * time.Millisecond}
	start := time.Now()
	if n, err := purgeBatches(context.Background(), p, dedupe.PurgeRequest{Limit: 10}, 0, 0.5); n != 23 || err != nil {
		t.Fatalf("purged %d (%v), want 23", n, err)
	}
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Fatalf("a paced run of 3 batches of 20 ms took %v, want at least 100 ms", took)
	}
	// A batch of 20 ms at a duty of 0.001 pauses ~20 s: the shutdown ends it.
	ctx, cancel := context.WithCancel(context.Background())
	p = &purgeStore{batches: []int{10, 10}, took: 20 * time.Millisecond}
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	n, err := purgeBatches(ctx, p, dedupe.PurgeRequest{Limit: 10}, 0, 0.001)
	if n != 10 || !errors.Is(err, context.Canceled) || p.calls != 1 {
		t.Fatalf("stopped during a pause: %d in %d calls (%v), want 10 in 1 and context.Canceled", n, p.calls, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the shutdown waited %v for the pause", took)
	}
}
