package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/sqlite"
)

// TestCheckpointOffTheWriter: under synchronous=normal the writer never
// checkpoints by itself (wal_autocheckpoint 0, but while a purge runs),
// and the checkpointer
// copies committed pages into the database file while the store is open:
// the file grows after a few claims, long before SQLite's own automatic
// checkpoint (1,000 WAL pages) would have run.
func TestCheckpointOffTheWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	s, err := sqlite.OpenWith(context.Background(), path, sqlite.Options{Synchronous: sqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	autocheckpoint := func(s *sqlite.Store) int {
		var n int
		if err := s.Write(ctx, "read wal_autocheckpoint", func(ctx context.Context, tx *sql.Tx) error {
			return tx.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&n)
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := autocheckpoint(s); n != 0 {
		t.Errorf("the writer's wal_autocheckpoint = %d, want 0", n)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	size0 := st.Size()
	for i := range 200 {
		if res, err := s.Claim(ctx, claimReq("s", fmt.Sprint("k", i), "h", i)); err != nil || res.Found != dedupe.Claimed {
			t.Fatalf("claim %d: %v, %v", i, res.Found, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > size0 && s.WALFrames() > 0 {
			t.Logf("database file %d → %d bytes; WAL %d frames at the last checkpoint", size0, st.Size(), s.WALFrames())
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("database file still %d bytes (WAL frames %d) 5 s after 200 claims: no checkpoint ran", st.Size(), s.WALFrames())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The purge gives the writer SQLite's automatic checkpoint for its
	// duration, and takes it back.
	if _, err := s.Purge(ctx, dedupe.PurgeRequest{Limit: 10}); err != nil {
		t.Fatal(err)
	}
	if n := autocheckpoint(s); n != 0 {
		t.Errorf("after a purge the writer's wal_autocheckpoint = %d, want 0", n)
	}
	// Under synchronous=full (the default) the writer keeps SQLite's own
	// automatic checkpoint.
	full := open(t)
	if n := autocheckpoint(full); n != 1000 {
		t.Errorf("synchronous=full: the writer's wal_autocheckpoint = %d, want SQLite's 1000", n)
	}
	if _, err := full.Purge(ctx, dedupe.PurgeRequest{Limit: 10}); err != nil {
		t.Fatal(err)
	}
	if n := autocheckpoint(full); n != 1000 {
		t.Errorf("synchronous=full, after a purge: the writer's wal_autocheckpoint = %d, want 1000", n)
	}
}
