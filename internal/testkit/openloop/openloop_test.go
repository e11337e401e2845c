package openloop_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/openloop"
)

func TestCountAndStop(t *testing.T) {
	var calls atomic.Int64
	res := openloop.Run(1000, 50, nil, 100, func(int64) error { calls.Add(1); return nil })
	if calls.Load() != 50 || len(res.Latencies) != 50 || res.Errors != 0 {
		t.Fatalf("n=50: %d calls, %d answered, %d errors", calls.Load(), len(res.Latencies), res.Errors)
	}
	stop := make(chan struct{})
	close(stop)
	if res := openloop.Run(1000, 0, stop, 100, func(int64) error { return nil }); len(res.Latencies) > 1 {
		t.Fatalf("stopped before the start: %d answered", len(res.Latencies))
	}
}

// A request due while maxInFlight are outstanding is not sent: counted as
// an error; a failing request is counted with its error.
func TestInFlightBoundAndErrors(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int64
	done := make(chan openloop.Result)
	go func() {
		done <- openloop.Run(100000, 20, nil, 5, func(k int64) error {
			calls.Add(1)
			<-release
			if k == 0 {
				return errors.New("boom")
			}
			return nil
		})
	}()
	time.Sleep(500 * time.Millisecond) // all 20 are due (in 0.2 ms) and offered by now
	close(release)
	res := <-done
	if calls.Load() != 5 || res.Errors != 16 || len(res.Latencies) != 4 {
		t.Fatalf("%d calls, %d errors, %d answered; want 5, 16 (15 not sent, 1 failed), 4", calls.Load(), res.Errors, len(res.Latencies))
	}
	// By when each was due: the first failed, the next four answered, the
	// rest were not sent.
	if len(res.ByDue) != 20 {
		t.Fatalf("ByDue has %d requests, want 20", len(res.ByDue))
	}
	for k, l := range res.ByDue {
		if answered := k >= 1 && k <= 4; answered != (l >= 0) {
			t.Errorf("ByDue[%d] = %v; answered: %v", k, l, answered)
		}
	}
}
