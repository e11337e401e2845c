package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/sqlite"
)

func TestParseDSN(t *testing.T) {
	for _, c := range []struct {
		in, path string
		sync     sqlite.Synchronous
		bad      bool
	}{
		{in: "/var/lib/hookonce/hookonce.db", path: "/var/lib/hookonce/hookonce.db"},
		{in: "h.db?synchronous=normal", path: "h.db", sync: sqlite.SyncNormal},
		{in: "h.db?synchronous=FULL", path: "h.db", sync: sqlite.SyncFull},
		{in: "/tmp/a?b/h.db", path: "/tmp/a?b/h.db"},       // a '?' in a directory name stays in the path
		{in: "/tmp/what?.db", path: "/tmp/what?.db"},       // no name=value after it
		{in: "h.db?synchronous=off", bad: true},            // not offered: a crash of hookonce could lose claims
		{in: "h.db?synchronus=normal", bad: true},          // misspelt: never part of a file name
		{in: "h.db?synchronous=normal&cache=1", bad: true}, // unknown parameter
	} {
		path, o, err := sqlite.ParseDSN(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("ParseDSN(%q) = %q, %+v; want an error", c.in, path, o)
			}
			continue
		}
		if err != nil || path != c.path || o.Synchronous != c.sync {
			t.Errorf("ParseDSN(%q) = %q, %+v, %v; want %q, %q", c.in, path, o, err, c.path, c.sync)
		}
	}
}

// TestSynchronousSetting reads the writer connection's synchronous back:
// FULL (2) by default, NORMAL (1) when the DSN asks for it.
func TestSynchronousSetting(t *testing.T) {
	for _, c := range []struct {
		opts sqlite.Options
		want int
	}{{sqlite.Options{}, 2}, {sqlite.Options{Synchronous: sqlite.SyncFull}, 2}, {sqlite.Options{Synchronous: sqlite.SyncNormal}, 1}} {
		s, err := sqlite.OpenWith(context.Background(), filepath.Join(t.TempDir(), "h.db"), c.opts)
		if err != nil {
			t.Fatal(err)
		}
		var got int
		err = s.Write(context.Background(), "read synchronous", func(ctx context.Context, tx *sql.Tx) error {
			return tx.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&got)
		})
		s.Close()
		if err != nil || got != c.want {
			t.Errorf("%+v: PRAGMA synchronous = %d, %v; want %d", c.opts, got, err, c.want)
		}
	}
}

// A durable acknowledgement's Defer is answered only once its commit is on
// disk, also on a store opened with synchronous=normal: its batch commits
// under FULL, and the connection is back to NORMAL for the next. A store
// under full needs no switch.
func TestDeferSyncedUnderNormal(t *testing.T) {
	ctx := context.Background()
	readSync := func(s *sqlite.Store, write func(context.Context, string, func(context.Context, *sql.Tx) error) error) int {
		t.Helper()
		var got int
		if err := write(ctx, "read synchronous", func(ctx context.Context, tx *sql.Tx) error {
			return tx.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&got)
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, c := range []struct {
		opts   sqlite.Options
		synced int64
	}{{sqlite.Options{Synchronous: sqlite.SyncNormal}, 1}, {sqlite.Options{}, 0}} {
		s, err := sqlite.OpenWith(ctx, filepath.Join(t.TempDir(), "h.db"), c.opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		plain := 1
		if c.opts.Synchronous == "" {
			plain = 2
		}
		for _, k := range []string{"sync", "durable"} {
			if _, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: "s", Key: k, PayloadHash: "h", Owner: "o", Lease: time.Minute, TTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Complete(ctx, "s", "sync", "o", dedupe.Response{Status: 200}, dedupe.Attempt{Outcome: "processed"}); err != nil {
			t.Fatal(err)
		}
		if n := s.SyncedBatches(); n != 0 {
			t.Fatalf("%+v: %d synced batches after claims and a completion, want 0", c.opts, n)
		}
		if err := s.Defer(ctx, "s", "durable", "o", dedupe.DeferRequest{Ack: dedupe.Response{Status: 200}, RetryFor: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if n := s.SyncedBatches(); n != c.synced {
			t.Fatalf("%+v: %d synced batches after Defer, want %d", c.opts, n, c.synced)
		}
		if got := readSync(s, s.WriteSynced); got != 2 {
			t.Fatalf("%+v: PRAGMA synchronous in a synced item = %d, want 2 (FULL)", c.opts, got)
		}
		if got := readSync(s, s.Write); got != plain {
			t.Fatalf("%+v: PRAGMA synchronous after it = %d, want %d", c.opts, got, plain)
		}
	}
}

// Purge's chunks commit without syncing the WAL on a store under full
// (nothing a sender was told rests on a purge), on the writer connection
// set to NORMAL for each chunk: the next claim's commit must find it back
// under FULL, however many chunks ran.
func TestPurgeLeavesWriterFull(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 120 // more than two chunks
	for i := range n {
		key := "evt_" + string(rune('a'+i%26)) + time.Duration(i).String()
		res, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: "shop", Key: key, PayloadHash: "h", Owner: "o",
			Lease: time.Minute, TTL: time.Millisecond})
		if err != nil || res.Found != dedupe.Claimed {
			t.Fatalf("claim %s: %+v, %v", key, res, err)
		}
		if err := s.Complete(ctx, "shop", key, "o", dedupe.Response{Status: 200}, dedupe.Attempt{At: time.Now(), Outcome: "processed", Status: 200}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	got, err := s.Purge(ctx, dedupe.PurgeRequest{})
	if err != nil || got != n {
		t.Fatalf("Purge = %d, %v; want %d", got, err, n)
	}
	var sync int
	if err := s.Write(ctx, "read synchronous", func(ctx context.Context, tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync)
	}); err != nil {
		t.Fatal(err)
	}
	if sync != 2 {
		t.Fatalf("after a purge the writer's PRAGMA synchronous = %d; want 2 (FULL): claims would commit unsynced", sync)
	}
}
