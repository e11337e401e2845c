package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
	"github.com/hookonce/hookonce/dedupe/sqlite"
)

// dropPending takes a file back to before migration 0008.
const dropPending = `DROP INDEX records_pending; ALTER TABLE records DROP COLUMN pending_since;
	ALTER TABLE records DROP COLUMN pending_next_at; ALTER TABLE records DROP COLUMN pending_until;
	ALTER TABLE records DROP COLUMN pending_tries; ALTER TABLE records DROP COLUMN pending_owner;
	ALTER TABLE records DROP COLUMN pending_lease_until; `

func TestPendingConformance(t *testing.T) {
	dedupetest.RunPendingConformance(t, openPrepared)
}

// Under synchronous=normal, Defer's batches switch the writer to FULL and
// back, and checkpoints run off the writer: the guarantees hold there too.
func TestPendingConformanceSynchronousNormal(t *testing.T) {
	dedupetest.RunPendingConformance(t, func(t *testing.T) dedupe.Store {
		s, err := sqlite.OpenWith(context.Background(), filepath.Join(t.TempDir(), "h.db"), sqlite.Options{Synchronous: sqlite.SyncNormal})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// claimDefer claims (sender, key) as new and defers it: done with an
// acknowledgement, owed to the site for retryFor, held by the claim's
// owner for lease when lease > 0.
func claimDefer(t *testing.T, s *sqlite.Store, sender, key string, ttl, retryFor, lease time.Duration) string {
	t.Helper()
	ctx := context.Background()
	owner := "o-" + key
	res, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: "h-" + key, Owner: owner,
		Lease: time.Minute, TTL: ttl, Request: &dedupe.StoredRequest{Method: "POST", URI: "/hook"}, RequestBody: []byte(key)})
	if err != nil || res.Found != dedupe.Claimed {
		t.Fatalf("claim %s/%s = %v, %v", sender, key, res.Found, err)
	}
	ack := dedupe.Response{Status: 200, Body: []byte("OK")}
	if err := s.Defer(ctx, sender, key, owner, dedupe.DeferRequest{Ack: ack, RetryFor: retryFor, Lease: lease}); err != nil {
		t.Fatalf("defer %s/%s: %v", sender, key, err)
	}
	return owner
}

// Two Store values on one file stand for two processes on one host: their
// writers take turns under BEGIN IMMEDIATE, so concurrent takes from both
// lease every due delivery exactly once.
func TestTakeDueTwoHandlesOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	ctx := context.Background()
	var stores [2]*sqlite.Store
	for i := range stores {
		s, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	const events = 30
	for i := range events {
		claimDefer(t, stores[i%2], "s", fmt.Sprintf("e%02d", i), time.Hour, time.Hour, 0)
	}
	var mu sync.Mutex
	taken := map[string]int{}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for {
				recs, err := stores[g%2].TakeDue(ctx, "s", fmt.Sprintf("d%d", g), time.Minute, 3)
				if err != nil {
					t.Errorf("TakeDue: %v", err)
					return
				}
				if len(recs) == 0 {
					return
				}
				mu.Lock()
				for _, r := range recs {
					taken[r.Key]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(taken) != events {
		t.Fatalf("%d distinct deliveries taken, want %d", len(taken), events)
	}
	for k, n := range taken {
		if n != 1 {
			t.Fatalf("%s taken %d times", k, n)
		}
	}
}

// A delivery held by a process that stops (its lease running) is taken
// by the next process on the file once the lease has passed, with the
// request as the sender sent it.
func TestPendingResumedAfterReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	first := claimDefer(t, s, "s", "evt", time.Hour, time.Hour, 300*time.Millisecond)
	s.Close()
	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if recs, err := s.TakeDue(ctx, "s", "second", time.Minute, 10); err != nil || len(recs) != 0 {
		t.Fatalf("take under the first lease = %d records, %v", len(recs), err)
	}
	time.Sleep(500 * time.Millisecond)
	recs, err := s.TakeDue(ctx, "s", "second", time.Minute, 10)
	if err != nil || len(recs) != 1 || recs[0].Pending.Owner != "second" || string(recs[0].RequestBody) != "evt" ||
		recs[0].Request == nil || recs[0].Request.URI != "/hook" {
		t.Fatalf("take after reopen = %+v, %v", recs, err)
	}
	err = s.SettlePending(ctx, "s", "evt", first, dedupe.PendingSettle{Outcome: dedupe.SettleDelivered})
	if !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("settle by the stopped process's owner: %v, want ErrNotOwner", err)
	}
}

// A record whose delivery is owed past its ExpiresAt is taken by a new
// claim as new (nothing of it kept), and its delivery is gone with it.
func TestClaimOverExpiredPendingClears(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	claimDefer(t, s, "s", "evt", 100*time.Millisecond, 100*time.Millisecond, 0)
	recs, err := s.TakeDue(ctx, "s", "d1", time.Minute, 10)
	if err != nil || len(recs) != 1 {
		t.Fatalf("take = %d, %v", len(recs), err)
	}
	time.Sleep(300 * time.Millisecond)
	res, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: "s", Key: "evt", PayloadHash: "other", Owner: "o2", Lease: time.Minute, TTL: time.Hour})
	if err != nil || res.Found != dedupe.Claimed || res.Record.Pending != nil {
		t.Fatalf("claim over the expired record = %v (pending %+v), %v", res.Found, res.Record.Pending, err)
	}
	if rec, err := s.Get(ctx, "s", "evt"); err != nil || rec.Pending != nil || rec.State != dedupe.StateProcessing {
		t.Fatalf("after the new claim: %+v, %v", rec, err)
	}
	if err := s.SettlePending(ctx, "s", "evt", "d1", dedupe.PendingSettle{Outcome: dedupe.SettleRetry}); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("settle of the replaced delivery: %v, want ErrNotOwner", err)
	}
	if counts, err := s.PendingCounts(ctx); err != nil || len(counts) != 0 {
		t.Fatalf("PendingCounts = %+v, %v; want none", counts, err)
	}
}

// Purge by age (ReceivedBefore, hookonce purge --older-than) skips owed
// deliveries too, and removes the record once its delivery is settled.
func TestPurgeReceivedBeforeKeepsPending(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	owner := claimDefer(t, s, "s", "owed", time.Hour, time.Hour, time.Minute)
	if _, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: "s", Key: "plain", PayloadHash: "h", Owner: "p", Lease: time.Minute, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "s", "plain", "p", dedupe.Response{Status: 200}, dedupe.Attempt{Outcome: "processed"}); err != nil {
		t.Fatal(err)
	}
	n, err := s.Purge(ctx, dedupe.PurgeRequest{ReceivedBefore: time.Now().Add(time.Hour)})
	if err != nil || n != 1 {
		t.Fatalf("purge = %d, %v; want 1 (the plain record)", n, err)
	}
	if rec, err := s.Get(ctx, "s", "owed"); err != nil || rec.Pending == nil {
		t.Fatalf("owed delivery after purge: %+v, %v", rec, err)
	}
	if err := s.SettlePending(ctx, "s", "owed", owner, dedupe.PendingSettle{Outcome: dedupe.SettleDelivered}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Purge(ctx, dedupe.PurgeRequest{ReceivedBefore: time.Now().Add(time.Hour)}); err != nil || n != 1 {
		t.Fatalf("purge after delivery = %d, %v; want 1", n, err)
	}
}

// TakeDue and PendingCounts read the partial index records_pending, not
// the table: the planner uses a partial index only when the query states
// its condition, which an edit of either query could lose.
func TestPendingQueryPlans(t *testing.T) {
	s := open(t)
	for _, c := range []struct {
		name, query, want string
		args              []any
	}{
		{"TakeDue", sqlite.QTakeDue, "USING INDEX records_pending (sender=? AND pending_next_at<?)", []any{"o", 1, "s", 1, 1, 10}},
		{"PendingCounts", sqlite.QPendingCounts, "USING COVERING INDEX records_pending", nil},
	} {
		var plan []string
		err := s.Write(context.Background(), "plan", func(ctx context.Context, tx *sql.Tx) error {
			rows, err := tx.QueryContext(ctx, "EXPLAIN QUERY PLAN "+c.query, c.args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					return err
				}
				plan = append(plan, detail)
			}
			return rows.Err()
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("%s plan:\n%s", c.name, strings.Join(plan, "\n"))
		if got := strings.Join(plan, "\n"); !strings.Contains(got, c.want) {
			t.Errorf("%s plan:\n%s\nwant %q", c.name, got, c.want)
		}
	}
}

// A file of version 7 gets the pending columns in place: its records read
// as before with no Pending, and a claim taken before the migration can
// be deferred and delivered. The read-only reader reads what is owed.
func TestMigrateToPending(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: "s", Key: "done", PayloadHash: "h", Owner: "o1", Lease: time.Minute, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "s", "done", "o1", dedupe.Response{Status: 201, Body: []byte("ok")}, dedupe.Attempt{Outcome: "processed"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: "s", Key: "busy", PayloadHash: "h", Owner: "o2", Lease: time.Minute, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(dropPending + `PRAGMA user_version = 7`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open of a version 7 file: %v", err)
	}
	if v := userVersion(t, path); v != sqlite.SchemaVersion {
		t.Fatalf("user_version = %d, want %d", v, sqlite.SchemaVersion)
	}
	done, err := s.Get(ctx, "s", "done")
	if err != nil || done.Pending != nil || done.Response == nil || done.Response.Status != 201 {
		t.Fatalf("done record after migration = %+v, %v", done, err)
	}
	if err := s.Defer(ctx, "s", "busy", "o2", dedupe.DeferRequest{Ack: dedupe.Response{Status: 200}, RetryFor: time.Hour}); err != nil {
		t.Fatalf("Defer of a claim taken before the migration: %v", err)
	}
	if counts, err := s.PendingCounts(ctx); err != nil || len(counts) != 1 || counts[0].Sender != "s" || counts[0].N != 1 {
		t.Fatalf("PendingCounts = %+v, %v", counts, err)
	}
	s.Close()

	ro, err := sqlite.OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rec, err := ro.Get(ctx, "s", "busy")
	if err != nil || rec.Pending == nil || rec.Pending.Until.Before(time.Now().Add(59*time.Minute)) {
		t.Fatalf("read-only Get of the owed delivery = %+v, %v", rec, err)
	}
	if recs, err := ro.List(ctx, dedupe.ListFilter{Pending: true}); err != nil || len(recs) != 1 || recs[0].Key != "busy" {
		t.Fatalf("read-only List(pending) = %d records, %v", len(recs), err)
	}
}
