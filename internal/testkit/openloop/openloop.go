// Package openloop offers requests at a fixed rate, for benchmarks: each
// on its own goroutine whatever the answers' latency, its latency counted
// from when it was due, so that a stall counts for every request it
// delayed (a closed loop would wait out the stall and hide it).
package openloop

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Result is what one run measured.
type Result struct {
	Latencies []time.Duration // of the requests answered, sorted
	// ByDue is each request's latency in the order they were due (the k-th
	// due k/rate after the start), -1 for one not answered: the latency of
	// a stretch of the run, such as a window of it.
	ByDue    []time.Duration
	Errors   int64 // requests that failed, or were not sent: too many in flight
	FirstErr error
	Elapsed  time.Duration
}

// Run offers op rate times a second, the k-th request due k/rate after
// the start, until n were offered (n <= 0: no such bound) or stop is
// closed (nil: never), and waits for the answers. At most maxInFlight
// requests are outstanding; a request due beyond that is not sent and
// counts as an error (the system cannot keep up: piling on would only
// measure the pile).
func Run(rate float64, n int64, stop <-chan struct{}, maxInFlight int64, op func(k int64) error) Result {
	interval := time.Duration(float64(time.Second) / rate)
	var (
		mu       sync.Mutex
		byDue    []time.Duration
		errs     atomic.Int64
		firstErr atomic.Value
		inFlight atomic.Int64
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		if errs.Add(1) == 1 {
			firstErr.Store(err)
		}
	}
	start := time.Now()
offer:
	for k := int64(0); n <= 0 || k < n; k++ {
		due := start.Add(time.Duration(k) * interval)
		t := time.NewTimer(time.Until(due))
		select {
		case <-stop:
			t.Stop()
			break offer
		case <-t.C:
		}
		mu.Lock()
		byDue = append(byDue, -1)
		mu.Unlock()
		if inFlight.Load() >= maxInFlight {
			fail(fmt.Errorf("more than %d requests in flight at %.0f/s", maxInFlight, rate))
			continue
		}
		inFlight.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer inFlight.Add(-1)
			if err := op(k); err != nil {
				fail(err)
				return
			}
			l := time.Since(due)
			mu.Lock()
			byDue[k] = l
			mu.Unlock()
		}()
	}
	wg.Wait()
	res := Result{ByDue: byDue, Errors: errs.Load(), Elapsed: time.Since(start)}
	res.FirstErr, _ = firstErr.Load().(error)
	for _, l := range byDue {
		if l >= 0 {
			res.Latencies = append(res.Latencies, l)
		}
	}
	slices.Sort(res.Latencies)
	return res
}
