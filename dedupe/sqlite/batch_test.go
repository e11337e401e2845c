package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/sqlite"
)

func open(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hookonce.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func claimReq(sender, key, hash string, i int) dedupe.ClaimRequest {
	return dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: hash,
		Owner: fmt.Sprintf("owner-%d", i), Lease: time.Minute, TTL: time.Hour}
}

// stall occupies the writer with an item that waits for the returned
// release, so that the writes sent meanwhile queue up and form one batch.
func stall(t *testing.T, s *sqlite.Store) (release func()) {
	t.Helper()
	started, gate, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.Write(context.Background(), "stall", func(context.Context, *sql.Tx) error {
			close(started)
			<-gate
			return nil
		})
	}()
	<-started
	return func() {
		close(gate)
		if err := <-done; err != nil {
			t.Errorf("stall: %v", err)
		}
	}
}

// waitQueued waits until n writes wait for the writer.
func waitQueued(t *testing.T, s *sqlite.Store, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Queued() < n {
		if time.Now().After(deadline) {
			t.Fatalf("queued = %d, want %d", s.Queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// claimAll runs n claims at once (made by mk) and returns their results.
func claimAll(t *testing.T, s *sqlite.Store, n int, mk func(i int) dedupe.ClaimRequest, sent func()) []dedupe.ClaimResult {
	t.Helper()
	res, errs := make([]dedupe.ClaimResult, n), make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			res[i], errs[i] = s.Claim(context.Background(), mk(i))
		})
	}
	close(start)
	if sent != nil {
		sent()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	return res
}

// 64 concurrent claims of distinct keys are all won and share commits,
// with no help (the batches form while a commit runs: how many depends on
// how the goroutines reach the writer, so only "fewer than one each" is
// asserted) and when they all wait behind one write (exactly one batch).
func TestGroupCommitDistinctKeys(t *testing.T) {
	const n = 64
	t.Run("Natural", func(t *testing.T) {
		s := open(t)
		before := s.Commits()
		res := claimAll(t, s, n, func(i int) dedupe.ClaimRequest {
			return claimReq("s", fmt.Sprintf("k%d", i), "h", i)
		}, nil)
		for i, r := range res {
			if r.Found != dedupe.Claimed {
				t.Errorf("claim %d: outcome %v, want Claimed", i, r.Found)
			}
		}
		commits := s.Commits() - before
		t.Logf("%d claims, %d commits", n, commits)
		if commits >= n {
			t.Errorf("%d claims took %d commits: none were shared", n, commits)
		}
	})
	t.Run("Queued", func(t *testing.T) {
		s := open(t)
		before := s.Commits()
		release := stall(t, s)
		res := claimAll(t, s, n, func(i int) dedupe.ClaimRequest {
			return claimReq("s", fmt.Sprintf("k%d", i), "h", i)
		}, func() { waitQueued(t, s, n); release() })
		for i, r := range res {
			if r.Found != dedupe.Claimed {
				t.Errorf("claim %d: outcome %v, want Claimed", i, r.Found)
			}
		}
		// The stall's commit, then one batch (two if a sender was counted
		// a moment before it reached the channel).
		if commits := s.Commits() - before; commits > 3 {
			t.Errorf("%d queued claims took %d commits (with the stall's), want at most 3", n, commits)
		}
		for i := range n {
			rec, err := s.Get(context.Background(), "s", fmt.Sprintf("k%d", i))
			if err != nil || rec.State != dedupe.StateProcessing || rec.Owner != fmt.Sprintf("owner-%d", i) {
				t.Errorf("k%d: %+v, %v", i, rec, err)
			}
		}
	})
}

// 64 concurrent claims of one key make exactly one winner, whether they
// come in several batches or all in one (judged in order inside it).
func TestGroupCommitOneKey(t *testing.T) {
	const n = 64
	check := func(t *testing.T, s *sqlite.Store, res []dedupe.ClaimResult) {
		winner := -1
		for i, r := range res {
			switch r.Found {
			case dedupe.Claimed:
				if winner >= 0 {
					t.Fatalf("claims %d and %d both won", winner, i)
				}
				winner = i
			case dedupe.InProgress:
			default:
				t.Errorf("claim %d: outcome %v, want Claimed or InProgress", i, r.Found)
			}
		}
		if winner < 0 {
			t.Fatal("no claim won")
		}
		for i, r := range res {
			if r.Record.Owner != fmt.Sprintf("owner-%d", winner) {
				t.Errorf("claim %d sees owner %q, want owner-%d", i, r.Record.Owner, winner)
			}
		}
		rec, err := s.Get(context.Background(), "s", "one")
		if err != nil || rec.Owner != fmt.Sprintf("owner-%d", winner) {
			t.Errorf("stored: %+v, %v; want owner-%d", rec, err, winner)
		}
	}
	mk := func(i int) dedupe.ClaimRequest { return claimReq("s", "one", "h", i) }
	t.Run("Natural", func(t *testing.T) {
		s := open(t)
		check(t, s, claimAll(t, s, n, mk, nil))
	})
	t.Run("Queued", func(t *testing.T) {
		s := open(t)
		release := stall(t, s)
		check(t, s, claimAll(t, s, n, mk, func() { waitQueued(t, s, n); release() }))
	})
}

// An item that fails is rolled back alone: the items beside it in its
// batch keep their writes and answers.
func TestGroupCommitFailingItem(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	release := stall(t, s)
	errBad := errors.New("bad item")
	var wg sync.WaitGroup
	var before, after dedupe.ClaimResult
	var beforeErr, afterErr, badErr error
	wg.Go(func() { before, beforeErr = s.Claim(ctx, claimReq("s", "before", "h", 1)) })
	waitQueued(t, s, 1)
	wg.Go(func() {
		badErr = s.Write(ctx, "bad", func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO records (sender, key, state, payload_hash, received_at, expires_at)
				VALUES ('s', 'bad', 'processing', 'h', 1, 9999999999999)`); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `SELECT nosuchcolumn FROM records`); err != nil {
				return fmt.Errorf("%w: %w", errBad, err)
			}
			return nil
		})
	})
	waitQueued(t, s, 2)
	wg.Go(func() { after, afterErr = s.Claim(ctx, claimReq("s", "after", "h", 3)) })
	waitQueued(t, s, 3)
	commits := s.Commits()
	release()
	wg.Wait()
	if !errors.Is(badErr, errBad) {
		t.Errorf("bad item: %v, want its own error", badErr)
	}
	if beforeErr != nil || before.Found != dedupe.Claimed || afterErr != nil || after.Found != dedupe.Claimed {
		t.Errorf("claims beside the bad item: %v %v, %v %v; want Claimed", before.Found, beforeErr, after.Found, afterErr)
	}
	if _, err := s.Get(ctx, "s", "bad"); !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("the bad item's write: %v, want rolled back", err)
	}
	if n := s.Commits() - commits; n != 2 {
		t.Errorf("%d commits after the stall, want 2 (the stall's and one batch)", n)
	}
}

// A lone item that fails (no savepoint: the transaction is its own) writes
// nothing, and the next write commits.
func TestGroupCommitLoneFailingItem(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	errBad := errors.New("bad item")
	err := s.Write(ctx, "bad", func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO records (sender, key, state, payload_hash, received_at, expires_at)
			VALUES ('s', 'bad', 'processing', 'h', 1, 9999999999999)`); err != nil {
			return err
		}
		return errBad
	})
	if !errors.Is(err, errBad) {
		t.Fatalf("lone bad item: %v, want its own error", err)
	}
	if _, err := s.Get(ctx, "s", "bad"); !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("the lone bad item's write: %v, want rolled back", err)
	}
	if res, err := s.Claim(ctx, claimReq("s", "k", "h", 1)); err != nil || res.Found != dedupe.Claimed {
		t.Fatalf("claim after it: %v, %v; want Claimed", res.Found, err)
	}
}

// A commit that fails answers every item of the batch with ErrUnavailable,
// and the next batch commits.
func TestGroupCommitCommitFails(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	release := stall(t, s)
	var wg sync.WaitGroup
	var claimErr, poisonErr error
	wg.Go(func() { _, claimErr = s.Claim(ctx, claimReq("s", "k", "h", 1)) })
	waitQueued(t, s, 1)
	wg.Go(func() {
		// A deferred foreign key that is still violated fails the COMMIT.
		poisonErr = s.Write(ctx, "poison", func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `CREATE TEMP TABLE p (id INTEGER PRIMARY KEY);
				CREATE TEMP TABLE c (x INTEGER REFERENCES p (id) DEFERRABLE INITIALLY DEFERRED);
				INSERT INTO c VALUES (1)`)
			return err
		})
	})
	waitQueued(t, s, 2)
	release()
	wg.Wait()
	if !errors.Is(claimErr, dedupe.ErrUnavailable) || !errors.Is(poisonErr, dedupe.ErrUnavailable) {
		t.Fatalf("after a failed commit: claim %v, poison %v; want ErrUnavailable for both", claimErr, poisonErr)
	}
	if _, err := s.Get(ctx, "s", "k"); !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("claim of a failed commit: %v, want not written", err)
	}
	res, err := s.Claim(ctx, claimReq("s", "k", "h", 2))
	if err != nil || res.Found != dedupe.Claimed {
		t.Fatalf("claim after the failed commit: %v, %v; want Claimed", res.Found, err)
	}
	// The same alone in its batch.
	err = s.Write(ctx, "poison", func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TEMP TABLE p (id INTEGER PRIMARY KEY);
			CREATE TEMP TABLE c (x INTEGER REFERENCES p (id) DEFERRABLE INITIALLY DEFERRED);
			INSERT INTO c VALUES (1)`)
		return err
	})
	if !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("lone item whose commit fails: %v, want ErrUnavailable", err)
	}
	res, err = s.Claim(ctx, claimReq("s", "k2", "h", 3))
	if err != nil || res.Found != dedupe.Claimed {
		t.Fatalf("claim after the lone failed commit: %v, %v; want Claimed", res.Found, err)
	}
}

// An item whose context ends after the writer took it, before it runs, is
// answered with its context's error wrapped in ErrUnavailable and skipped.
func TestGroupCommitCancelledItem(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	release := stall(t, s)
	var wg sync.WaitGroup
	var firstErr, cancelledErr error
	var res dedupe.ClaimResult
	wg.Go(func() {
		firstErr = s.Write(ctx, "canceller", func(context.Context, *sql.Tx) error { cancel(); return nil })
	})
	waitQueued(t, s, 1)
	wg.Go(func() { res, cancelledErr = s.Claim(cctx, claimReq("s", "k", "h", 1)) })
	waitQueued(t, s, 2)
	release()
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	if !errors.Is(cancelledErr, dedupe.ErrUnavailable) || !errors.Is(cancelledErr, context.Canceled) {
		t.Fatalf("cancelled claim: %v %v, want ErrUnavailable wrapping context.Canceled", res.Found, cancelledErr)
	}
	if _, err := s.Get(ctx, "s", "k"); !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("cancelled claim: %v, want nothing written", err)
	}
}

// A caller whose context ends while its write waits gets ErrUnavailable
// at once, whether the writer has not taken the write yet or has taken it
// into a batch that is still running; in the latter case the write, not
// yet run when its turn comes, is skipped.
func TestGroupCommitCallerGivesUp(t *testing.T) {
	t.Run("NotTaken", func(t *testing.T) {
		s := open(t)
		release := stall(t, s)
		defer release()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := s.Claim(ctx, claimReq("s", "k", "h", 1))
		if !errors.Is(err, dedupe.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("claim behind a stalled writer: %v, want ErrUnavailable wrapping DeadlineExceeded", err)
		}
	})
	t.Run("InBatch", func(t *testing.T) {
		s := open(t)
		release := stall(t, s)
		running, gate := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		var blockErr, claimErr error
		wg.Go(func() {
			blockErr = s.Write(context.Background(), "block", func(context.Context, *sql.Tx) error {
				close(running)
				<-gate
				return nil
			})
		})
		waitQueued(t, s, 1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		claimed := make(chan struct{})
		wg.Go(func() { _, claimErr = s.Claim(ctx, claimReq("s", "k", "h", 1)); close(claimed) })
		waitQueued(t, s, 2)
		release() // the writer takes block and the claim in one batch
		<-running // block runs, the claim waits its turn in the batch
		if s.Queued() != 0 {
			t.Fatalf("queued = %d, want both taken", s.Queued())
		}
		cancel()
		select {
		case <-claimed: // answered while its batch still runs
		case <-time.After(5 * time.Second):
			t.Error("claim still waiting for its batch after its context ended")
		}
		close(gate)
		wg.Wait()
		if blockErr != nil {
			t.Fatal(blockErr)
		}
		if !errors.Is(claimErr, dedupe.ErrUnavailable) || !errors.Is(claimErr, context.Canceled) {
			t.Fatalf("claim given up in a batch: %v, want ErrUnavailable wrapping Canceled", claimErr)
		}
		if _, err := s.Get(context.Background(), "s", "k"); !errors.Is(err, dedupe.ErrNotFound) {
			t.Errorf("claim given up before it ran: %v, want nothing written", err)
		}
	})
}

// Writes after Close fail with ErrUnavailable instead of hanging.
func TestGroupCommitAfterClose(t *testing.T) {
	s := open(t)
	s.Close()
	_, err := s.Claim(context.Background(), claimReq("s", "k", "h", 1))
	if !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("claim after Close: %v, want ErrUnavailable", err)
	}
	if err := s.Renew(context.Background(), "s", "k", "o", time.Minute); !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("renew after Close: %v, want ErrUnavailable", err)
	}
}
