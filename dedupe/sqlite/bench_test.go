package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/sqlite"
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
						if res, err := s.Claim(ctx, req); err != nil || res.Found != dedupe.Claimed {
							b.Errorf("claim %d: %v, %v", i, res.Found, err)
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

// BenchmarkKeyPart100k: a support search by one part of the key
// (ListFilter.KeyPart) in 100,000 records of 8 senders, T-Bank-like keys
// PaymentId:Status; the payment is among the oldest, so the search reads
// every record (or every record of the sender):
//
//	go test ./dedupe/sqlite -run '^$' -bench KeyPart100k -benchtime 20x
func BenchmarkKeyPart100k(b *testing.B) {
	s := open(b)
	ctx := context.Background()
	err := s.Write(ctx, "fill", func(ctx context.Context, tx *sql.Tx) error {
		now := time.Now().UnixMilli()
		for i := 1; i <= 100000; i++ {
			if _, err := tx.ExecContext(ctx, `INSERT INTO records (sender, key, state, payload_hash, received_at, expires_at)
				VALUES (?, ?, 'done', 'h', ?, ?)`, fmt.Sprintf("sender-%d", i%8), fmt.Sprintf("%d:CONFIRMED", 8000000+i),
				now-int64(i)*1000, now+86400000); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, sender := range []string{"", "sender-1"} {
		b.Run("sender="+sender, func(b *testing.B) {
			for b.Loop() {
				recs, err := s.List(ctx, dedupe.ListFilter{Sender: sender, KeyPart: "8099993", Limit: 50})
				if err != nil || len(recs) != 1 {
					b.Fatalf("List = %d records, %v", len(recs), err)
				}
			}
		})
	}
}

// BenchmarkNewEventSynchronous: new events (Claim of a new key, then
// Complete, as a delivery makes them) by 32 goroutines at once, with the
// writes synced at every commit (synchronous=full, the default) and at
// checkpoints only (synchronous=normal), as events/s:
//
//	go test ./dedupe/sqlite -run '^$' -bench NewEventSynchronous -benchtime 4s -count 4
func BenchmarkNewEventSynchronous(b *testing.B) {
	resp := dedupe.Response{Status: 200, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"ok":true}`)}
	for _, mode := range []sqlite.Synchronous{sqlite.SyncFull, sqlite.SyncNormal} {
		b.Run(string(mode), func(b *testing.B) {
			s, err := sqlite.OpenWith(context.Background(), filepath.Join(b.TempDir(), "hookonce.db"), sqlite.Options{Synchronous: mode})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			var next atomic.Int64
			var wg sync.WaitGroup
			commits := s.Commits()
			b.ResetTimer()
			start := time.Now()
			for range 32 {
				wg.Go(func() {
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						req := dedupe.ClaimRequest{Sender: "bench", Key: fmt.Sprintf("k%d", i), PayloadHash: "h",
							Owner: fmt.Sprintf("o%d", i), Lease: time.Minute, TTL: time.Hour}
						if res, err := s.Claim(ctx, req); err != nil || res.Found != dedupe.Claimed {
							b.Errorf("claim %d: %v, %v", i, res.Found, err)
							return
						}
						if err := s.Complete(ctx, req.Sender, req.Key, req.Owner, resp,
							dedupe.Attempt{At: time.Now(), By: dedupe.AttemptBySender, Outcome: "completed", Status: 200}); err != nil {
							b.Errorf("complete %d: %v", i, err)
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

// BenchmarkDurableAck: what a durable acknowledgement (ack: durable)
// writes on the request path next to a synchronous delivery's: a new
// event's Claim, then Defer (the delivery stored, the sender answered)
// or, for comparison, Complete (the site's answer stored). Events/s at 1
// and 8 goroutines; the difference per event is the durable ack's cost in
// the store. The delivery to the site itself is off the request path.
//
//	go test ./dedupe/sqlite -run '^$' -bench DurableAck -benchtime 2s
func BenchmarkDurableAck(b *testing.B) {
	ack := dedupe.Response{Status: 200, Body: []byte("OK77")}
	for _, mode := range []string{"site", "durable"} {
		for _, g := range []int{1, 8} {
			b.Run(fmt.Sprintf("ack=%s/goroutines=%d", mode, g), func(b *testing.B) {
				s := open(b)
				ctx := context.Background()
				body := []byte(`{"InvId":77,"OutSum":"10.00"}`)
				head := &dedupe.StoredRequest{Method: "POST", URI: "/result.php", Header: map[string][]string{"Content-Type": {"application/json"}}}
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for range g {
					wg.Go(func() {
						for {
							i := next.Add(1) - 1
							if i >= int64(b.N) {
								return
							}
							key, owner := fmt.Sprintf("k%d", i), fmt.Sprintf("o%d", i)
							req := dedupe.ClaimRequest{Sender: "bench", Key: key, PayloadHash: "h", Owner: owner,
								Lease: time.Minute, TTL: time.Hour, Request: head, RequestBody: body}
							if res, err := s.Claim(ctx, req); err != nil || res.Found != dedupe.Claimed {
								b.Errorf("claim %d: %v, %v", i, res.Found, err)
								return
							}
							var err error
							if mode == "durable" {
								err = s.Defer(ctx, "bench", key, owner, dedupe.DeferRequest{Ack: ack, RetryFor: 72 * time.Hour, Lease: time.Minute})
							} else {
								err = s.Complete(ctx, "bench", key, owner, ack, dedupe.Attempt{At: time.Now(), Outcome: "processed", Status: 200})
							}
							if err != nil {
								b.Errorf("settle %d: %v", i, err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
			})
		}
	}
}
