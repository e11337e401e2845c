// Package retention is the purge loop that serve's background purge and
// the purge command share: Purge calls of a bounded batch until one comes
// back short, paced so that the claims beside it hardly notice.
//
// How to pace depends on what a purge costs the claims. On PostgreSQL a
// claim that arrives while a batch runs waits for it (the batch's CPU
// and WAL beside the claim's, on the same cores and disk), so the cost is
// the share of claims that meet a batch. Measured on 2 cores at 1,000 new
// events/s (bench TestGrowth, 334 k of 1 M records expired): paced to 30%
// of the time, 39% of the claims met a batch and 52 of the slowest 56;
// paced by rate from 500 records a second, 0.7–1.1% and 4–12% of the
// slowest 1%, and the p99 of all claims was within 0.1–0.5 ms of theirs
// that met none. So there the purge begins slowly (Floor records a second, one
// batch of 500 a second) and speeds up only while it has not caught up:
// it doubles its rate after each RampEvery of one run, up to Duty of the
// time. A run that ends within RampEvery halves the rate the next begins
// with (not below Floor), so the pace settles near the rate at which
// records expire, which is the rate at which they were made.
//
// On SQLite the cost is per record removed, whatever the pace: each one
// dirties a page of its own (the records are in key order, and keys are
// random), and every claim's commit and checkpoint after a batch carries
// those pages, the claims that met no batch as much as those that did. A
// slow purge then costs longer without costing less at a time (500
// records a second added ~3 ms to the p99, 30% of the time ~5.6 ms), so
// there the purge is paced by Duty alone and is over soonest.
package retention

import (
	"context"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// Purger runs purges of one store. Its rate carries from one Run to the
// next; one goroutine runs it at a time.
type Purger struct {
	Store dedupe.Store
	// PerCall bounds each Purge call (0: the run's context only).
	PerCall time.Duration
	// Duty is the most of its time a run spends in Purge calls: after each
	// full batch it pauses at least the batch's time × (1 − Duty) / Duty.
	// 0 or 1: no such pause.
	Duty float64
	// Floor is the rate in records a second a run begins at, and the
	// lowest it falls back to (0: no rate, only Duty paces).
	Floor float64
	// RampEvery: while a run goes on, its rate doubles after each
	// RampEvery (0: never; the rate stays Floor).
	RampEvery time.Duration
	// OnBatch, when set, is told each Purge call's start and end
	// (benchmarks: which claims met a batch).
	OnBatch func(from, to time.Time)

	rate float64 // records a second the next run begins at (≥ Floor)
}

// Background is serve's purge of store: batches of BackgroundBatch, each
// call bounded by 10 s, never over 30% of the time. perClaim says that the
// store's purge costs the claims that meet one of its batches rather
// than every claim after it (PostgreSQL, Redis; not SQLite): such a purge
// is also paced by rate, from 500 records a second, doubling every two
// minutes a run goes on.
func Background(store dedupe.Store, perClaim bool) *Purger {
	p := &Purger{Store: store, PerCall: 10 * time.Second, Duty: 0.3}
	if perClaim {
		p.Floor, p.RampEvery = BackgroundBatch, 2*time.Minute
	}
	return p
}

// BackgroundBatch is how many records a call of serve's purge removes.
const BackgroundBatch = 500

// Rate is the rate in records a second the next run begins at (0 without
// Floor).
func (p *Purger) Rate() float64 { return max(p.rate, p.Floor) }

// Run calls Purge with req (req.Limit is the batch; 0: one unbounded call)
// until a batch comes back short, pausing after each full batch as the
// pace says. It returns how many records were removed, also when it stops
// at an error or when ctx ends during a pause. Each run has a new cursor
// (req.Cursor), so a batch carries on where the one before it ended, and
// every run starts from the beginning once and finds what an earlier run
// passed over.
func (p *Purger) Run(ctx context.Context, req dedupe.PurgeRequest) (int, error) {
	total := 0
	req.Cursor = new(dedupe.PurgeCursor)
	rate := p.Rate()
	start := time.Now()
	ramped := start
	defer func() {
		if time.Since(start) < p.RampEvery {
			rate = max(p.Floor, rate/2) // it caught up at once: slower next time
		}
		p.rate = rate
	}()
	for {
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if p.PerCall > 0 {
			cctx, cancel = context.WithTimeout(ctx, p.PerCall)
		}
		t0 := time.Now()
		n, err := p.Store.Purge(cctx, req)
		t1 := time.Now()
		cancel()
		if p.OnBatch != nil {
			p.OnBatch(t0, t1)
		}
		total += n
		if err != nil {
			return total, err
		}
		if req.Limit <= 0 || n < req.Limit {
			return total, nil
		}
		busy := t1.Sub(t0)
		byDuty := Pause(busy, p.Duty)
		if p.RampEvery > 0 && t1.Sub(ramped) >= p.RampEvery {
			ramped = t1
			if byRate(n, rate, busy) > byDuty {
				rate *= 2 // not caught up; Duty does not bound it yet
			}
		}
		if d := max(byDuty, byRate(n, rate, busy)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return total, ctx.Err()
			case <-t.C:
			}
		}
	}
}

// Pause is how long to pause after a batch that took busy, so that
// batches take duty of the time; none for a duty of 0 or at least 1.
func Pause(busy time.Duration, duty float64) time.Duration {
	if duty <= 0 || duty >= 1 {
		return 0
	}
	return time.Duration(float64(busy) * (1 - duty) / duty)
}

// byRate is the pause after a batch of n records that took busy, so that
// the run removes rate records a second (0: no rate).
func byRate(n int, rate float64, busy time.Duration) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(float64(n)/rate*float64(time.Second)) - busy
}
