package retention_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/retention"
)

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
	if n, err := (&retention.Purger{Store: p, PerCall: time.Second}).Run(ctx, dedupe.PurgeRequest{Limit: 10}); n != 23 || err != nil || p.calls != 3 {
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
	if _, err := (&retention.Purger{Store: p}).Run(ctx, dedupe.PurgeRequest{Limit: 10, Cursor: first}); err != nil {
		t.Fatal(err)
	}
	if p.cursors[0] == first || !p.seen[0].Records.IsZero() {
		t.Fatalf("second run's cursor %p at %v, want a new one from the start (the first run's was %p)", p.cursors[0], p.seen[0], first)
	}
	p = &purgeStore{batches: []int{10, 10}, fail: dedupe.ErrUnavailable}
	if n, err := (&retention.Purger{Store: p}).Run(ctx, dedupe.PurgeRequest{Limit: 10}); n != 20 || !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("purged %d (%v), want 20 and the failure", n, err)
	}
	p = &purgeStore{batches: []int{7}}
	if n, err := (&retention.Purger{Store: p}).Run(ctx, dedupe.PurgeRequest{}); n != 7 || err != nil || p.calls != 1 {
		t.Fatalf("unbounded purge: %d in %d calls (%v), want 7 in 1", n, p.calls, err)
	}
}

// A purge with a duty pauses after each full batch, so that deleting
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
		if got := retention.Pause(c.busy, c.duty); got != c.want {
			t.Errorf("retention.Pause(%v, %v) = %v, want %v", c.busy, c.duty, got, c.want)
		}
	}
	// Three calls of 20 ms, two pauses of at least 20 ms each at a duty of
	// 0.5: at least 100 ms in all (a timer never fires early).
	p := &purgeStore{batches: []int{10, 10, 3}, took: 20 * time.Millisecond}
	start := time.Now()
	if n, err := (&retention.Purger{Store: p, Duty: 0.5}).Run(context.Background(), dedupe.PurgeRequest{Limit: 10}); n != 23 || err != nil {
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
	n, err := (&retention.Purger{Store: p, Duty: 0.001}).Run(ctx, dedupe.PurgeRequest{Limit: 10})
	if n != 10 || !errors.Is(err, context.Canceled) || p.calls != 1 {
		t.Fatalf("stopped during a pause: %d in %d calls (%v), want 10 in 1 and context.Canceled", n, p.calls, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the shutdown waited %v for the pause", took)
	}
}

// A rate paces the batches: a run begins at Floor records a second,
// doubles it after each RampEvery it goes on, keeps it for the next run,
// and a run that ends within RampEvery halves it, never below Floor.
// Timers never fire early, so the lower bounds are exact.
func TestPurgeRampsWhileBehind(t *testing.T) {
	ctx := context.Background()
	pr := &retention.Purger{Floor: 20, RampEvery: 400 * time.Millisecond}
	if pr.Rate() != 20 {
		t.Fatalf("a new purger's rate %v, want its floor 20", pr.Rate())
	}
	// 10 records at 20/s: 500 ms before the second call, which comes after
	// RampEvery, so the rate doubles: 250 ms before the third.
	pr.Store = &purgeStore{batches: []int{10, 10, 3}}
	start := time.Now()
	if n, err := pr.Run(ctx, dedupe.PurgeRequest{Limit: 10}); n != 23 || err != nil {
		t.Fatalf("purged %d (%v), want 23", n, err)
	}
	if took := time.Since(start); took < 750*time.Millisecond {
		t.Fatalf("batches of 10 from 20/s, doubled after the first pause, took %v, want at least 750 ms", took)
	}
	if pr.Rate() != 40 {
		t.Fatalf("after a run that went on past RampEvery the rate is %v, want 40 (doubled once, kept)", pr.Rate())
	}
	for _, want := range []float64{20, 20} {
		pr.Store = &purgeStore{batches: []int{3}} // caught up at once
		if _, err := pr.Run(ctx, dedupe.PurgeRequest{Limit: 10}); err != nil {
			t.Fatal(err)
		}
		if pr.Rate() != want {
			t.Fatalf("after a short run the rate is %v, want %v (halved, not below the floor)", pr.Rate(), want)
		}
	}
	// Where Duty already bounds the pace (20 ms calls at 0.5: a 20 ms
	// pause, longer than 10 records at 1,000/s leave), doubling the rate
	// would change nothing, so it does not double.
	pr = &retention.Purger{Duty: 0.5, Floor: 1000, RampEvery: time.Millisecond,
		Store: &purgeStore{batches: []int{10, 10, 10, 3}, took: 20 * time.Millisecond}}
	if _, err := pr.Run(ctx, dedupe.PurgeRequest{Limit: 10}); err != nil {
		t.Fatal(err)
	}
	if pr.Rate() != 1000 {
		t.Fatalf("a rate Duty bounds doubled: %v, want 1000", pr.Rate())
	}
}

// serve's purge: paced by rate, from one batch a second, only where a
// batch costs the claims that meet it; on SQLite by its share of the
// time alone, so quick batches follow each other at once.
func TestBackground(t *testing.T) {
	full := retention.BackgroundBatch
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	n, err := retention.Background(&purgeStore{batches: []int{full, full, 3}}, false).Run(ctx, dedupe.PurgeRequest{Limit: full})
	if n != 2*full+3 || err != nil {
		t.Fatalf("SQLite's pace: purged %d (%v), want %d at once", n, err, 2*full+3)
	}
	n, err = retention.Background(&purgeStore{batches: []int{full, full, 3}}, true).Run(ctx, dedupe.PurgeRequest{Limit: full})
	if n != full || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a paced purge in 300 ms: purged %d (%v), want one batch, then a pause of a second", n, err)
	}
}
