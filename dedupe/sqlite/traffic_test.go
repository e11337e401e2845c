package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
	"github.com/hookonce/hookonce/dedupe/sqlite"
)

func TestTrafficConformance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "traffic.db")
	dedupetest.RunTrafficConformance(t, func(t *testing.T) dedupe.Store {
		s, err := sqlite.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}, func(t *testing.T) dedupe.Store {
		s, err := sqlite.OpenReadOnly(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// A store of the version before the counters gains their table on Open
// and keeps its records.
func TestTrafficMigration(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "old.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	o := "o1"
	if _, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: "s", Key: "k", PayloadHash: "h", Owner: o, Lease: time.Minute, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	v := userVersion(t, path)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	// Back to version 4 (before the counters, 0005): what later
	// migrations added goes too (0006: answered_duplicate; 0007:
	// fingerprint and meta; 0008: the pending columns).
	if _, err := db.Exec(`DROP TABLE traffic; ALTER TABLE conflicts DROP COLUMN answered_duplicate;
		ALTER TABLE records DROP COLUMN fingerprint; DROP TABLE meta; ` + dropPending + `PRAGMA user_version = 4`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open of the version before: %v", err)
	}
	defer s.Close()
	if got := userVersion(t, path); got != v {
		t.Fatalf("user_version after Open = %d, want %d", got, v)
	}
	if rec, err := s.Get(ctx, "s", "k"); err != nil || rec.State != dedupe.StateProcessing {
		t.Fatalf("record after migration = %+v, %v", rec, err)
	}
	day := dedupe.TrafficDay(time.Now())
	if err := s.AddTraffic(ctx, []dedupe.TrafficCount{{Day: day, Sender: "s", Path: "/p", Outcome: "processed", Status: 200, N: 2}}); err != nil {
		t.Fatal(err)
	}
	if cs, err := s.Traffic(ctx, day); err != nil || len(cs) != 1 || cs[0].N != 2 {
		t.Fatalf("Traffic after migration = %+v, %v", cs, err)
	}
}
