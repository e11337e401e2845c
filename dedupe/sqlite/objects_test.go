package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
	"github.com/hookonce/hookonce/dedupe/sqlite"
)

// The object locks, like the claims, run their statements as prepared at
// Open.
func TestObjectConformance(t *testing.T) {
	dedupetest.RunObjectConformance(t, openPrepared)
}

// Two processes on one file (two handles): lockers spread over both, one
// holder; the object is freed through the other handle than it was taken.
func TestObjectTwoHandlesOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	a, b := mustOpen(t, path), mustOpen(t, path)
	handles := []*sqlite.Store{a, b}
	var won atomic.Int32
	var winner atomic.Value
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := fmt.Sprintf("o%d", i)
			ok, err := handles[i%2].LockObject(ctxT(t), "orders", "42", own, time.Minute)
			if err != nil {
				t.Errorf("LockObject: %v", err)
			}
			if ok {
				won.Add(1)
				winner.Store(own)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d of 32 lockers on two handles hold the object, want 1", won.Load())
	}
	own := winner.Load().(string)
	if ok, err := b.LockObject(ctxT(t), "orders", "42", "late", time.Minute); err != nil || ok {
		t.Fatalf("LockObject of a held object = %v, %v", ok, err)
	}
	for _, h := range handles {
		if err := h.RenewObject(ctxT(t), "orders", "42", own, time.Minute); err != nil {
			t.Fatalf("RenewObject by the holder: %v", err)
		}
	}
	if err := a.UnlockObject(ctxT(t), "orders", "42", own); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.LockObject(ctxT(t), "orders", "42", "late", time.Minute); err != nil || !ok {
		t.Fatalf("LockObject after the unlock = %v, %v", ok, err)
	}
}

// Purge removes the locks whose lease ended more than an hour ago (their
// holder died without unlocking) and keeps the others, held or lately
// expired, whatever the request says of records.
func TestPurgeRemovesStaleObjects(t *testing.T) {
	s := mustOpen(t, filepath.Join(t.TempDir(), "hookonce.db"))
	now := time.Now()
	rows := map[string]time.Time{
		"stale":  now.Add(-2 * time.Hour),
		"recent": now.Add(-30 * time.Minute), // expired, within the hour
		"held":   now.Add(time.Minute),
	}
	err := s.Write(ctxT(t), "seed", func(ctx context.Context, tx *sql.Tx) error {
		for obj, until := range rows {
			if _, err := tx.ExecContext(ctx, `INSERT INTO objects (scope, object, owner, lease_until) VALUES ('s', ?, ?, ?)`,
				obj, "own-"+obj, until.UnixMilli()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []dedupe.PurgeRequest{{}, {ReceivedBefore: now.Add(-time.Minute), Limit: 10}} {
		n, err := s.Purge(ctxT(t), req)
		if err != nil || n != 0 {
			t.Fatalf("Purge(%+v) = %d, %v; want 0 records", req, n, err)
		}
	}
	if err := s.UnlockObject(ctxT(t), "s", "stale", "own-stale"); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("the stale lock after Purge: unlock err = %v, want ErrNotOwner (removed)", err)
	}
	if err := s.UnlockObject(ctxT(t), "s", "recent", "own-recent"); err != nil {
		t.Fatalf("a lock expired 30 minutes ago was purged: %v", err)
	}
	if ok, err := s.LockObject(ctxT(t), "s", "held", "other", time.Minute); err != nil || ok {
		t.Fatalf("a held lock after Purge: LockObject by another = %v, %v; want still held", ok, err)
	}
}

// A read-only handle refuses the object locks as it refuses every write,
// and writes nothing.
func TestReadOnlyRefusesObjectLocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookonce.db")
	rw := mustOpen(t, path)
	if ok, err := rw.LockObject(ctxT(t), "s", "o", "holder", time.Minute); err != nil || !ok {
		t.Fatalf("LockObject = %v, %v", ok, err)
	}
	ro, ok := mustOpenReadOnly(t, path).(dedupe.ObjectLocker)
	if !ok {
		t.Fatal("the read-only store is no dedupe.ObjectLocker")
	}
	_, lockErr := ro.LockObject(ctxT(t), "s", "free", "x", time.Minute)
	for name, err := range map[string]error{
		"LockObject":   lockErr,
		"RenewObject":  ro.RenewObject(ctxT(t), "s", "o", "holder", time.Hour),
		"UnlockObject": ro.UnlockObject(ctxT(t), "s", "o", "holder"),
	} {
		if !errors.Is(err, dedupe.ErrReadOnly) {
			t.Errorf("%s on a read-only store: err = %v, want ErrReadOnly", name, err)
		}
	}
	if ok, err := rw.LockObject(ctxT(t), "s", "o", "other", time.Minute); err != nil || ok {
		t.Fatalf("after the refused unlock the object is free (%v, %v)", ok, err)
	}
	if ok, err := rw.LockObject(ctxT(t), "s", "free", "other", time.Minute); err != nil || !ok {
		t.Fatalf("after the refused lock the object is taken (%v, %v)", ok, err)
	}
}
