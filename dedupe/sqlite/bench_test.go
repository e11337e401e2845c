package sqlite_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// BenchmarkClaim: new events claimed by 1, 8 and 32 goroutines at once on
// one store, as events/s (each a Claim of a key never seen before).
//
//	go test ./dedupe/sqlite -run '^$' -bench Claim -benchtime 2s
func BenchmarkClaim(b *testing.B) {
	for _, g := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			var next atomic.Int64
			var wg sync.WaitGroup
			commits := s.Commits()
			b.ResetTimer()
			start := time.Now()
			for range g {
				wg.Go(func() {
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						req := dedupe.ClaimRequest{Sender: "bench", Key: fmt.Sprintf("k%d", i), PayloadHash: "h",
							Owner: fmt.Sprintf("o%d", i), Lease: time.Minute, TTL: time.Hour}
						if res, err := s.Claim(ctx, req); err != nil || res.Outcome != dedupe.Claimed {
							b.Errorf("claim %d: %v, %v", i, res.Outcome, err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
			b.ReportMetric(float64(b.N)/float64(max(s.Commits()-commits, 1)), "events/commit")
		})
	}
}
