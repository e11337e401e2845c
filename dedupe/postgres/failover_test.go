package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

// cancelSyncWaits cancels, from a session of its own, every backend of
// the server at dsn that waits for synchronous replication, once there is
// one (an operator's pg_cancel_backend: PostgreSQL then answers the COMMIT
// as a success, with a WARNING).
func cancelSyncWaits(t *testing.T, s *postgres.Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := s.Pool().QueryRow(ctxFor(t, 5*time.Second),
			`SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&n)
		if err != nil {
			t.Errorf("cancel sync waits: %v", err)
			return
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Error("no backend waited for synchronous replication")
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Store level (#36): with the synchronous standby's link stalled, a commit
// whose wait the server cancels is a success to pgx, and one whose caller
// gives up is kept on the primary; neither is taken as stored or owned. A
// claim, a completion, an operator's free and forget and a solo write
// answer ErrUnavailable (before: a claim, a completion, a free and a forget
// that succeeded); GetConfirmed answers
// ErrUnavailable while the standby lags and the record once it has it.
func TestUnconfirmedCommit(t *testing.T) {
	primary := pgtest.Start(t)
	dsn := primary.NewDatabase(t)
	s := mustNew(t, dsn)
	admin := mustNew(t, dsn)
	_, link := pgtest.StartStandby(t, primary)
	if err := primary.SetSynchronousStandbys("*", 1); err != nil {
		t.Fatal(err)
	}
	done := claimReq("done", "h")
	if _, err := s.Claim(ctxFor(t, 5*time.Second), done); err != nil {
		t.Fatal(err)
	}
	held := claimReq("held", "h")
	if _, err := s.Claim(ctxFor(t, 5*time.Second), held); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"freed", "gone"} {
		if _, err := s.Claim(ctxFor(t, 5*time.Second), claimReq(k, "h")); err != nil {
			t.Fatal(err)
		}
	}
	link.Stall()
	resumed := false
	defer func() {
		if !resumed {
			link.Resume()
		}
	}()

	// A claim whose wait the server cancels.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); cancelSyncWaits(t, admin) }()
	res, err := s.Claim(ctxFor(t, 10*time.Second), claimReq("new", "h"))
	wg.Wait()
	if !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("claim whose sync wait was cancelled: %v %v, want ErrUnavailable", res.Found, err)
	}

	// A completion whose wait the server cancels.
	wg.Add(1)
	go func() { defer wg.Done(); cancelSyncWaits(t, admin) }()
	err = s.Complete(ctxFor(t, 10*time.Second), "s", "done", done.Owner, dedupe.Response{Status: 200}, testAttempt("processed"))
	wg.Wait()
	if !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("completion whose sync wait was cancelled: %v, want ErrUnavailable", err)
	}
	// It is on the primary: Get sees it, GetConfirmed does not vouch for it.
	if rec, err := s.Get(ctxFor(t, 5*time.Second), "s", "done"); err != nil || rec.State != dedupe.StateDone {
		t.Fatalf("Get on the primary: %v %v, want the unconfirmed completion", rec.State, err)
	}
	began := time.Now()
	if rec, err := s.GetConfirmed(ctxFor(t, 500*time.Millisecond), "s", "done"); !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("GetConfirmed with the standby stalled: %v %v, want ErrUnavailable", rec.State, err)
	}
	if took := time.Since(began); took > 500*time.Millisecond+slack {
		t.Fatalf("GetConfirmed took %v with a 500ms deadline", took)
	}

	// An operator's free and forget whose waits the server cancels: not
	// reported as done (the standby may never have them).
	for _, w := range []struct {
		what  string
		write func() error
	}{
		{"free", func() error {
			_, err := s.Free(ctxFor(t, 10*time.Second), "s", "freed", testAttempt("freed"))
			return err
		}},
		{"forget", func() error { return s.Forget(ctxFor(t, 10*time.Second), "s", "gone") }},
	} {
		what, write := w.what, w.write
		// Cancel every wait until the write answers: a backend of an
		// earlier caller that gave up may still be waiting too.
		finished := make(chan error, 1)
		go func() { finished <- write() }()
		var err error
	cancelling:
		for {
			select {
			case err = <-finished:
				break cancelling
			case <-time.After(50 * time.Millisecond):
				_, _ = admin.Pool().Exec(ctxFor(t, 5*time.Second),
					`SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`)
			}
		}
		if !errors.Is(err, dedupe.ErrUnavailable) || !errors.Is(err, dedupe.ErrNotConfirmed) {
			t.Fatalf("%s whose sync wait was cancelled: %v, want ErrUnavailable and ErrNotConfirmed", what, err)
		}
	}

	// A write of a caller that gives up: an error, as ever.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err = s.Hold(ctx, "s", "held", held.Owner, testAttempt("ambiguous"))
	cancel()
	if !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("hold with the standby stalled: %v, want ErrUnavailable", err)
	}

	link.Resume()
	resumed = true
	rec, err := s.GetConfirmed(ctxFor(t, 10*time.Second), "s", "done")
	if err != nil || rec.State != dedupe.StateDone {
		t.Fatalf("GetConfirmed with the standby back: %v %v", rec.State, err)
	}
	if _, err := s.GetConfirmed(ctxFor(t, 10*time.Second), "s", "absent"); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("GetConfirmed of no record: %v, want ErrNotFound", err)
	}
}
