package postgres_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

// slack is what a call may take beyond its deadline (scheduling under
// -race on a busy 2-core machine); a call that hangs exceeds it by far.
const slack = 1500 * time.Millisecond

// claimWithin claims under a deadline and returns the error and how long
// the call took.
func claimWithin(s dedupe.Store, d time.Duration, r dedupe.ClaimRequest) (dedupe.ClaimResult, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	res, err := s.Claim(ctx, r)
	return res, time.Since(start), err
}

// eventually claims until it works, for up to 15s, and fails the test if it
// never does.
func eventually(t *testing.T, s dedupe.Store, r dedupe.ClaimRequest) dedupe.ClaimResult {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, _, err := claimWithin(s, 2*time.Second, r)
		if err == nil {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("store did not recover: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func mustUnavailable(t *testing.T, what string, err error, took, deadline time.Duration) {
	t.Helper()
	if !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("%s: err = %v, want ErrUnavailable", what, err)
	}
	if took > deadline+slack {
		t.Fatalf("%s took %v with a %v deadline", what, took, deadline)
	}
}

// The database goes away and comes back: calls fail fast with
// ErrUnavailable while it is gone, and the same Store works again after,
// with what was stored before intact and nothing written during the outage.
func TestOutageStopStart(t *testing.T) {
	srv := pgtest.Start(t)
	s := mustNew(t, srv.NewDatabase(t))
	before := claimReq("before", "h")
	if _, err := s.Claim(ctxFor(t, 5*time.Second), before); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctxFor(t, 5*time.Second), "s", "before", before.Owner, dedupe.Response{Status: 200, Body: []byte("ok")}, testAttempt("processed")); err != nil {
		t.Fatal(err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	const deadline = 500 * time.Millisecond
	for i := range 3 {
		_, took, err := claimWithin(s, deadline, claimReq("during", "h"))
		mustUnavailable(t, "Claim with the database stopped", err, took, deadline)
		_ = i
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	err := s.Complete(ctx, "s", "before", before.Owner, dedupe.Response{Status: 200}, testAttempt("processed"))
	cancel()
	mustUnavailable(t, "Complete with the database stopped", err, 0, deadline)
	if err := s.Ping(ctxFor(t, deadline)); !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("Ping with the database stopped: %v", err)
	}
	if err := s.Probe(ctxFor(t, deadline)); !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("Probe with the database stopped: %v", err)
	}
	// A replica starting now (serve migrates on start) fails fast, too.
	began := time.Now()
	if _, err := postgres.Open(ctxFor(t, deadline), srv.DSN("postgres")); !errors.Is(err, dedupe.ErrUnavailable) || time.Since(began) > deadline+slack {
		t.Fatalf("New with the database stopped: %v after %v", err, time.Since(began))
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	res := eventually(t, s, claimReq("during", "h"))
	if res.Found != dedupe.Claimed {
		t.Fatalf("first claim of 'during' after the outage: %v, want claimed", res.Found)
	}
	if err := s.Probe(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatalf("Probe after the outage: %v", err)
	}
	dup := eventually(t, s, claimReq("before", "h"))
	if dup.Found != dedupe.Duplicate || string(dup.Record.Response.Body) != "ok" {
		t.Fatalf("record stored before the outage: %v %+v", dup.Found, dup.Record.Response)
	}
}

// A frozen database (SIGSTOP on the postmaster and every backend: open
// connections stay up, nothing answers) turns into ErrUnavailable within the
// deadline, concurrent callers included, and leaves no goroutine behind.
func TestPausedDatabase(t *testing.T) {
	srv := pgtest.Start(t)
	// connect_timeout bounds the connection attempts pgxpool keeps making in
	// the background while the server is frozen.
	s, err := postgres.Open(ctxFor(t, 30*time.Second), srv.NewDatabase(t)+"&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Warm the pool so that frozen connections are in it.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Claim(context.Background(), claimReq("warm", "h"))
		}()
	}
	wg.Wait()
	// Then one alone: the batcher's last batch carried one statement, so
	// the first frozen claim below is sent on its caller's goroutine (the
	// concurrent ones after it through a flusher goroutine).
	s.Claim(context.Background(), claimReq("alone", "h"))
	baseline := settledGoroutines()

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()

	const deadline = 300 * time.Millisecond
	// The frozen claims carry a short lease: a claim sent before its caller
	// gave up may still be executed when the server thaws (see below).
	var frozenOwners sync.Map
	frozen := func() dedupe.ClaimRequest {
		r := claimReq("frozen", "h")
		r.Lease = 2 * time.Second
		frozenOwners.Store(r.Owner, true)
		return r
	}
	_, took, err := claimWithin(s, deadline, frozen())
	mustUnavailable(t, "Claim on a paused database", err, took, deadline)
	errs := make(chan error, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, took, err := claimWithin(s, deadline, frozen())
			if !errors.Is(err, dedupe.ErrUnavailable) || took > deadline+slack {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Claim on a paused database: %v (or past its deadline)", err)
	}

	// pgx closes a connection whose query was cancelled and tells the
	// server so from a goroutine bounded at 15s; background connection
	// attempts are bounded by connect_timeout. All of them must end while
	// the database is still frozen.
	end := time.Now().Add(25 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(end) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines 25s after the calls returned, %d before the pause:\n%s",
				runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(100 * time.Millisecond)
	}

	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	// A query already in a frozen backend's socket runs when it thaws, even
	// though its caller was told ErrUnavailable and never forwarded: such a
	// late claim blocks its key only until its lease ends, and is then taken
	// over. Any other holder would be a bug.
	end = time.Now().Add(15 * time.Second)
	for {
		res := eventually(t, s, claimReq("frozen", "h"))
		if res.Found == dedupe.Claimed || res.Found == dedupe.TakenOver {
			break
		}
		if _, ok := frozenOwners.Load(res.Record.Owner); res.Found != dedupe.InProgress || !ok {
			t.Fatalf("claim after resume: %v held by %q, want claimed, or in progress under a frozen caller's late claim", res.Found, res.Record.Owner)
		}
		if time.Now().After(end) {
			t.Fatal("a late claim from the frozen period outlived its lease")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// settledGoroutines waits for the goroutine count to stop moving.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return n
		}
		n = m
	}
	return n
}
