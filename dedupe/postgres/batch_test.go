package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

// claimAll runs one Claim per request, all released at once, and answers
// their results and errors in request order.
func claimAll(s *postgres.Store, reqs []dedupe.ClaimRequest) ([]dedupe.ClaimResult, []error) {
	res := make([]dedupe.ClaimResult, len(reqs))
	errs := make([]error, len(reqs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res[i], errs[i] = s.Claim(ctx, r)
		}()
	}
	close(start)
	wg.Wait()
	return res, errs
}

func background(n int) []context.Context {
	ctxs := make([]context.Context, n)
	for i := range ctxs {
		ctxs[i] = context.Background()
	}
	return ctxs
}

// 64 concurrent claims of distinct keys share commits: far fewer batches
// (round trips, each one commit) than claims, and every one is won.
func TestConcurrentClaimsShareCommits(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	const n = 64
	reqs := make([]dedupe.ClaimRequest, n)
	for i := range reqs {
		reqs[i] = claimReq(fmt.Sprintf("gc%d", i), "h")
	}
	b0, c0 := postgres.ClaimBatches(s)
	res, errs := claimAll(s, reqs)
	for i := range reqs {
		if errs[i] != nil || res[i].Found != dedupe.Claimed || res[i].Record.Owner != reqs[i].Owner {
			t.Errorf("claim %d: %v %v owner %q", i, res[i].Found, errs[i], res[i].Record.Owner)
		}
	}
	b1, c1 := postgres.ClaimBatches(s)
	batches, claims := b1-b0, c1-c0
	t.Logf("%d claims in %d batches", claims, batches)
	if claims != n || batches > n/4 {
		t.Errorf("%d claim statements in %d batches, want %d in at most %d", claims, batches, n, n/4)
	}
	// Queued at once, they make exactly one batch.
	for i := range reqs {
		reqs[i] = claimReq(fmt.Sprintf("gc-one-%d", i), "h")
	}
	recs, errs2 := postgres.ClaimStatements(background(n), s, reqs)
	for i := range reqs {
		if errs2[i] != nil || recs[i].Owner != reqs[i].Owner {
			t.Errorf("statement %d: %v owner %q", i, errs2[i], recs[i].Owner)
		}
	}
	if b2, _ := postgres.ClaimBatches(s); b2-b1 != 1 {
		t.Errorf("%d claims queued at once took %d batches, want 1", n, b2-b1)
	}
	for i := range reqs {
		if rec, err := s.Get(ctxFor(t, 5*time.Second), "s", reqs[i].Key); err != nil || rec.Owner != reqs[i].Owner {
			t.Errorf("stored %s: %v owner %q, want %q", reqs[i].Key, err, rec.Owner, reqs[i].Owner)
		}
	}
}

// A delivery's first try claims a new key, or reads the record of a known
// one, inside the batch: no read of its own. Only a record that gives way
// (here a released one) takes the read-then-claim loop.
func TestFirstTryIsOneRoundTrip(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	ctx := ctxFor(t, 30*time.Second)
	const n = 32
	reqs := make([]dedupe.ClaimRequest, n)
	for i := range reqs {
		reqs[i] = claimReq(fmt.Sprintf("first%d", i), "h")
	}
	r0 := postgres.LoopReads(s)
	res, errs := claimAll(s, reqs)
	for i := range reqs {
		if errs[i] != nil || res[i].Found != dedupe.Claimed {
			t.Fatalf("claim %d: %v %v", i, res[i].Found, errs[i])
		}
		if err := s.Complete(ctx, "s", reqs[i].Key, reqs[i].Owner, dedupe.Response{Status: 200, Body: []byte("ok")}, dedupe.Attempt{}); err != nil {
			t.Fatal(err)
		}
	}
	// Repeats: the same payload is a duplicate, another one a conflict, a
	// key in progress is in progress; each from the batched read.
	again := make([]dedupe.ClaimRequest, 0, n+2)
	for i := range reqs {
		again = append(again, claimReq(reqs[i].Key, "h"))
	}
	again = append(again, claimReq("first0", "other"))
	busy := claimReq("busy", "h")
	if res, err := s.Claim(ctx, busy); err != nil || res.Found != dedupe.Claimed {
		t.Fatalf("busy: %v %v", res.Found, err)
	}
	again = append(again, claimReq("busy", "h"))
	res, errs = claimAll(s, again)
	for i := range again {
		want := dedupe.Duplicate
		switch {
		case i == n:
			want = dedupe.Conflicting
		case i == n+1:
			want = dedupe.InProgress
		}
		if errs[i] != nil || res[i].Found != want {
			t.Errorf("repeat %d (%s): %v %v, want %v", i, again[i].Key, res[i].Found, errs[i], want)
		}
	}
	if d := postgres.LoopReads(s) - r0; d != 0 {
		t.Errorf("new keys and repeats made %d reads of their own, want 0", d)
	}
	// A released record gives way: the loop claims it.
	if err := s.Release(ctx, "s", "busy", busy.Owner, dedupe.Attempt{}); err != nil {
		t.Fatal(err)
	}
	retry := claimReq("busy", "h")
	if res, err := s.Claim(ctx, retry); err != nil || res.Found != dedupe.Claimed || res.Record.Owner != retry.Owner {
		t.Errorf("released record: %v %v owner %q", res.Found, err, res.Record.Owner)
	}
	if d := postgres.LoopReads(s) - r0; d != 1 {
		t.Errorf("the released record took %d loop reads, want 1", d)
	}
}

// Claims of one key, in one batch or across batches, make exactly one
// winner: in one batch they are judged in order, the first wins.
func TestConcurrentClaimsOfOneKeyOneWinner(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	const n = 64
	reqs := make([]dedupe.ClaimRequest, n)
	for i := range reqs {
		reqs[i] = claimReq("one", "h")
	}
	res, errs := claimAll(s, reqs)
	won := 0
	for i := range reqs {
		switch {
		case errs[i] != nil:
			t.Errorf("claim %d: %v", i, errs[i])
		case res[i].Found == dedupe.Claimed:
			won++
		case res[i].Found != dedupe.InProgress:
			t.Errorf("claim %d: outcome %v", i, res[i].Found)
		}
	}
	if won != 1 {
		t.Errorf("%d winners, want 1", won)
	}

	for i := range reqs {
		reqs[i] = claimReq("one-batch", "h")
	}
	b0, _ := postgres.ClaimBatches(s)
	recs, errs2 := postgres.ClaimStatements(background(n), s, reqs)
	if errs2[0] != nil || recs[0].Owner != reqs[0].Owner {
		t.Errorf("first of the batch: %v owner %q, want it to win", errs2[0], recs[0].Owner)
	}
	for i := 1; i < n; i++ {
		if !errors.Is(errs2[i], pgx.ErrNoRows) {
			t.Errorf("statement %d: %v (owner %q), want no row", i, errs2[i], recs[i].Owner)
		}
	}
	if b1, _ := postgres.ClaimBatches(s); b1-b0 != 1 {
		t.Errorf("took %d batches, want 1", b1-b0)
	}
}

// A batch stuck on a row lock does not hold up claims of other keys: once
// no batch has been sent for a moment, the next claim starts another
// flusher.
func TestStalledBatchDoesNotBlockOthers(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	s := mustNew(t, dsn)
	ctx := ctxFor(t, 30*time.Second)
	// Another session inserts "locked" and keeps its transaction open: a
	// claim of that key waits on it.
	other, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `INSERT INTO hookonce_records (sender, key, state, payload_hash, received_at, expires_at)
		VALUES ('s', 'locked', 'done', 'h', now(), now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	stuck := make(chan error, 1)
	go func() {
		_, err := s.Claim(ctx, claimReq("locked", "h"))
		stuck <- err
	}()
	// Wait until its batch is at the server, waiting for the lock.
	waitForLockWait(t, mustNew(t, dsn), "the claim of the locked key never waited for the lock")
	time.Sleep(2 * 20 * time.Millisecond) // past the flusher's stall threshold
	start := time.Now()
	free := claimReq("free", "h")
	res, err := s.Claim(ctxFor(t, 3*time.Second), free)
	if err != nil || res.Found != dedupe.Claimed {
		t.Fatalf("claim of a free key behind a stalled batch: %v %v after %s", res.Found, err, time.Since(start))
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("claim of a free key took %s behind a stalled batch", took)
	}
	select {
	case err := <-stuck:
		t.Fatalf("the claim of the locked key returned before the lock was released: %v", err)
	default:
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-stuck; err != nil {
		t.Errorf("claim of the formerly locked key: %v", err)
	}
}

// A statement the server refuses aborts its batch's transaction: nothing
// of the batch is written, every claim of it is tried again alone, and only
// the bad one fails (and not as an outage).
func TestFailingClaimInABatch(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	const n = 16
	reqs := make([]dedupe.ClaimRequest, n)
	for i := range reqs {
		reqs[i] = claimReq(fmt.Sprintf("bad%d", i), "h")
	}
	reqs[5].Owner = "bad\x00owner" // text cannot hold NUL: the claim statement fails
	_, errs := postgres.ClaimStatements(background(n), s, reqs)
	for i, err := range errs {
		if !errors.Is(err, postgres.ErrSolo) {
			t.Errorf("statement %d: %v, want ErrSolo", i, err)
		}
	}
	for i := range reqs {
		if _, err := s.Get(ctxFor(t, 5*time.Second), "s", reqs[i].Key); !errors.Is(err, dedupe.ErrNotFound) {
			t.Fatalf("%s after the aborted batch: %v, want not found", reqs[i].Key, err)
		}
	}

	res, cerrs := claimAll(s, reqs)
	for i := range reqs {
		switch {
		case i == 5:
			if cerrs[i] == nil || errors.Is(cerrs[i], dedupe.ErrUnavailable) {
				t.Errorf("bad claim: %v, want a non-outage error", cerrs[i])
			}
		case cerrs[i] != nil || res[i].Found != dedupe.Claimed:
			t.Errorf("claim %d: %v %v", i, res[i].Found, cerrs[i])
		}
	}
}

// An item whose context is done before its batch is sent is answered with
// its context's error, and not sent; the others of the batch go on.
func TestClaimContextDoneBeforeSending(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	reqs := []dedupe.ClaimRequest{claimReq("live", "h"), claimReq("gone", "h")}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	recs, errs := postgres.ClaimStatements([]context.Context{context.Background(), gone}, s, reqs)
	if errs[0] != nil || recs[0].Owner != reqs[0].Owner {
		t.Errorf("live item: %v owner %q", errs[0], recs[0].Owner)
	}
	if !errors.Is(errs[1], context.Canceled) {
		t.Errorf("cancelled item: %v, want context.Canceled", errs[1])
	}
	if _, err := s.Get(ctxFor(t, 5*time.Second), "s", "gone"); !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("cancelled item was written: %v", err)
	}
	if _, err := s.Claim(gone, claimReq("gone", "h")); !errors.Is(err, dedupe.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("Claim with a cancelled context: %v, want ErrUnavailable wrapping context.Canceled", err)
	}
}

// BenchmarkClaim32 claims distinct keys from 32 goroutines, batched and
// each claim alone, on a durable server (fsync on: commits cost a flush).
func BenchmarkClaim32(b *testing.B) {
	srv := pgtest.StartWith(b, pgtest.Options{Durable: true})
	for _, batched := range []bool{false, true} {
		b.Run(fmt.Sprintf("batched=%v", batched), func(b *testing.B) {
			s := mustNew(b, srv.NewDatabase(b))
			postgres.SetClaimBatching(s, batched)
			const workers = 32
			b0, _ := postgres.ClaimBatches(s)
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < b.N; i += workers {
						r := claimReq(fmt.Sprintf("bench-%d", i), "h")
						if res, err := s.Claim(context.Background(), r); err != nil || res.Found != dedupe.Claimed {
							b.Errorf("claim %d: %v %v", i, res.Found, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b1, _ := postgres.ClaimBatches(s)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
			b.ReportMetric(float64(b1-b0), "batches")
		})
	}
}

// Concurrent completions share commits as claims do, each fenced by its
// own owner.
func TestConcurrentCompletesShareCommits(t *testing.T) {
	fencedWritesShareCommits(t, "done", func(s *postgres.Store, key, owner string, i int) error {
		return s.Complete(ctxFor(t, 30*time.Second), "s", key, owner,
			dedupe.Response{Status: 200 + i, Body: []byte("ok")}, testAttempt("completed"))
	}, func(i int, rec dedupe.Record, err error) string {
		if i == stranger {
			if !errors.Is(err, dedupe.ErrNotOwner) || rec.State != dedupe.StateProcessing {
				return fmt.Sprintf("complete by a stranger: %v, state %s", err, rec.State)
			}
		} else if err != nil || rec.State != dedupe.StateDone || rec.Response == nil || rec.Response.Status != 200+i {
			return fmt.Sprintf("complete %d: %v, state %s, response %+v", i, err, rec.State, rec.Response)
		}
		return ""
	})
}

// stranger is the write of fencedWritesShareCommits sent with an owner
// token that holds nothing.
const stranger = 7

// fencedWritesShareCommits claims 64 keys, then sends write (a fenced
// write of a claim: Complete, Defer) for all of them at once, the
// stranger's with a wrong owner: they must go in at most 16 batches, and
// check judges each record after (its problem, or "").
func fencedWritesShareCommits(t *testing.T, prefix string, write func(s *postgres.Store, key, owner string, i int) error,
	check func(i int, rec dedupe.Record, err error) string) {
	t.Helper()
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	const n = 64
	reqs := make([]dedupe.ClaimRequest, n)
	for i := range reqs {
		reqs[i] = claimReq(fmt.Sprintf("%s%d", prefix, i), "h")
	}
	if _, errs := claimAll(s, reqs); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	b0, _ := postgres.ClaimBatches(s)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			owner := r.Owner
			if i == stranger {
				owner = "not-the-owner"
			}
			errs[i] = write(s, r.Key, owner, i)
		}()
	}
	close(start)
	wg.Wait()
	b1, _ := postgres.ClaimBatches(s)
	t.Logf("%d writes in %d batches", n, b1-b0)
	if b1-b0 > n/4 {
		t.Errorf("%d writes took %d batches, want at most %d", n, b1-b0, n/4)
	}
	for i, r := range reqs {
		rec, err := s.Get(ctxFor(t, 5*time.Second), "s", r.Key)
		if err != nil {
			t.Errorf("get %s: %v", r.Key, err)
			continue
		}
		if problem := check(i, rec, errs[i]); problem != "" {
			t.Error(problem)
		}
	}
}

// A lone claim is sent by its own caller (no flusher runs). The claims
// that arrive while it is at the server queue behind it, as behind a
// flusher's batch, and once it is answered they go in one batch of their
// own: none is left waiting when the caller that sent alone returns.
func TestClaimsQueuedBehindALoneClaim(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	s := mustNew(t, dsn)
	postgres.SetStallAfter(s, time.Hour) // no second flusher: they must wait for the first
	ctx := ctxFor(t, 30*time.Second)
	other, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `INSERT INTO hookonce_records (sender, key, state, payload_hash, received_at, expires_at)
		VALUES ('s', 'locked', 'done', 'h', now(), now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	b0, _ := postgres.ClaimBatches(s)
	lone := make(chan error, 1)
	go func() {
		_, err := s.Claim(ctx, claimReq("locked", "h"))
		lone <- err
	}()
	waitForLockWait(t, mustNew(t, dsn), "the lone claim never waited for the lock")
	const n = 8
	reqs := make([]dedupe.ClaimRequest, n)
	for i := range reqs {
		reqs[i] = claimReq(fmt.Sprintf("behind%d", i), "h")
	}
	type result struct {
		res dedupe.ClaimResult
		err error
	}
	behind := make(chan result, n)
	for _, r := range reqs {
		go func() {
			res, err := s.Claim(ctx, r)
			behind <- result{res, err}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	if len(behind) != 0 || len(lone) != 0 {
		t.Fatalf("%d claims behind the lone one, and %d lone, returned while it waited for the lock", len(behind), len(lone))
	}
	if b, _ := postgres.ClaimBatches(s); b-b0 != 1 {
		t.Fatalf("%d batches sent while the lone claim waited, want 1 (its own)", b-b0)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-lone; err != nil {
		t.Errorf("lone claim: %v", err)
	}
	for range n {
		select {
		case r := <-behind:
			if r.err != nil || r.res.Found != dedupe.Claimed {
				t.Errorf("claim queued behind the lone one: %v %v", r.res.Found, r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("claims queued behind the lone one were never sent")
		}
	}
	if b, _ := postgres.ClaimBatches(s); b-b0 > 3 {
		t.Errorf("the lone claim and the %d behind it took %d batches, want at most 3", n, b-b0)
	}
	for _, r := range reqs {
		if rec, err := s.Get(ctx, "s", r.Key); err != nil || rec.Owner != r.Owner {
			t.Errorf("stored %s: %v owner %q, want %q", r.Key, err, rec.Owner, r.Owner)
		}
	}
}

// waitForLockWait waits (10 s at most) until some backend of the test's
// database waits for a lock, as the claim of a locked key does once its
// batch is at the server; else it fails with never.
func waitForLockWait(t *testing.T, watch *postgres.Store, never string) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting int
		if err := watch.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(never)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
