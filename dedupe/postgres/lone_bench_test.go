//go:build unix

package postgres_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

// BenchmarkNewEventAlone is one new event at a time (a claim, then its
// completion), each statement a batch of one: the batcher's cost when no
// batch forms. cpu-µs/op is this process's CPU (user and system, the
// server's excluded) per event, which a loaded machine skews less than
// the time per event.
func BenchmarkNewEventAlone(b *testing.B) {
	s := mustNew(b, pgtest.Shared(b).NewDatabase(b))
	ctx := context.Background()
	cpu0 := processCPU()
	b.ResetTimer()
	for i := range b.N {
		r := claimReq(fmt.Sprintf("alone-%d", i), "h")
		if res, err := s.Claim(ctx, r); err != nil || res.Found != dedupe.Claimed {
			b.Fatalf("claim %d: %v %v", i, res.Found, err)
		}
		if err := s.Complete(ctx, "s", r.Key, r.Owner, dedupe.Response{Status: 200, Body: []byte("OK")}, testAttempt("processed")); err != nil {
			b.Fatalf("complete %d: %v", i, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the user and system CPU this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
