package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
	"github.com/hookonce/hookonce/dedupe/redis"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
)

func ack() dedupe.Response { return dedupe.Response{Status: 200, Body: []byte("OK")} }

func mustDeferRedis(t *testing.T, s *redis.Store, sender, key string, ttl, retryFor, lease time.Duration) string {
	t.Helper()
	o := "owner-" + key
	r := claimReq(sender, key, "h-"+key, o, time.Minute)
	r.TTL = ttl
	mustClaim(t, s, r, dedupe.Claimed)
	if err := s.Defer(ctxT(t, 5*time.Second), sender, key, o, dedupe.DeferRequest{Ack: ack(), RetryFor: retryFor, Lease: lease}); err != nil {
		t.Fatalf("Defer(%s/%s): %v", sender, key, err)
	}
	return o
}

func pendingOf(t *testing.T, s *redis.Store, sender string) (dedupe.PendingCount, bool) {
	t.Helper()
	counts, err := s.PendingCounts(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatalf("PendingCounts: %v", err)
	}
	for _, c := range counts {
		if c.Sender == sender {
			return c, true
		}
	}
	return dedupe.PendingCount{}, false
}

func pttl(t *testing.T, srv *redistest.Server, key string) time.Duration {
	t.Helper()
	n, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(srv.Do(t, "PTTL", key)), ":"), 10, 64)
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	return time.Duration(n) * time.Millisecond
}

// The pending conformance with every Defer, renewal and settle waiting for
// a real replica.
func TestPendingConformanceWaitReplicas(t *testing.T) {
	primary, _ := redistest.StartPrimaryWithReplica(t)
	url := primary.URL() + "?wait_replicas=1&wait_replicas_timeout=2s"
	dedupetest.RunPendingConformance(t, func(t *testing.T) dedupe.Store { return mustOpen(t, url) })
}

// While a delivery is owed, Redis keeps the record an hour past its
// retry_for (a try under way at the end can still be settled) and the
// record reports ExpiresAt no earlier than the delivery's end; once it is
// delivered the record goes back to that ExpiresAt.
func TestPendingKeyOutlivesRetryFor(t *testing.T) {
	srv := redistest.Shared(t)
	s := mustOpen(t, srv.URL())
	sender := fmt.Sprintf("outlive-%d", time.Now().UnixNano())
	o := mustDeferRedis(t, s, sender, "evt", time.Hour, 2*time.Hour, time.Minute)
	rec, err := s.Get(ctxT(t, 5*time.Second), sender, "evt")
	if err != nil || rec.Pending == nil {
		t.Fatalf("Get: %+v %v", rec, err)
	}
	if !rec.ExpiresAt.Equal(rec.Pending.Until) {
		t.Fatalf("ExpiresAt %v, want the delivery's end %v (ttl 1h < retry_for 2h)", rec.ExpiresAt, rec.Pending.Until)
	}
	key := "hookonce:{" + sender + ":evt}"
	if d := pttl(t, srv, key); d < 3*time.Hour-time.Minute || d > 3*time.Hour {
		t.Fatalf("PTTL while owed = %v, want retry_for + 1h (3h)", d)
	}
	if err := s.SettlePending(ctxT(t, 5*time.Second), sender, "evt", o, dedupe.PendingSettle{Outcome: dedupe.SettleDelivered, Attempt: att("processed")}); err != nil {
		t.Fatal(err)
	}
	if d := pttl(t, srv, key); d < 2*time.Hour-time.Minute || d > 2*time.Hour {
		t.Fatalf("PTTL once delivered = %v, want the extended ExpiresAt (2h)", d)
	}
}

// Once deferred, the claim is over for its owner too: a Complete (or a
// Hold) by it is refused and leaves the delivery owed and the
// acknowledgement stored.
func TestCompleteAfterDeferRefused(t *testing.T) {
	s := mustOpen(t, redistest.Shared(t).URL())
	sender := fmt.Sprintf("afterdefer-%d", time.Now().UnixNano())
	o := mustDeferRedis(t, s, sender, "evt", time.Hour, time.Hour, time.Minute)
	ctx := ctxT(t, 5*time.Second)
	site := dedupe.Response{Status: 201, Body: []byte("site")}
	if err := s.Complete(ctx, sender, "evt", o, site, att("processed")); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("Complete after Defer: err = %v, want ErrNotOwner", err)
	}
	if err := s.Hold(ctx, sender, "evt", o, att("ambiguous")); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("Hold after Defer: err = %v, want ErrNotOwner", err)
	}
	rec, err := s.Get(ctx, sender, "evt")
	if err != nil || rec.Pending == nil || rec.Response == nil || string(rec.Response.Body) != "OK" || len(rec.Attempts) != 0 {
		t.Fatalf("after the refused writes: %+v %v", rec, err)
	}
}

// Index entries whose record owes nothing (a Defer refused after Cluster
// indexed it first; a record taken as new past its ttl) are never taken,
// counted only while a claim is under way on the record, and dropped.
func TestPendingStaleEntries(t *testing.T) {
	single := redistest.Shared(t)
	cluster := redistest.StartCluster(t)
	for _, tc := range []struct {
		name string
		srv  *redistest.Server
		url  string
	}{{"single", single, single.URL()}, {"cluster", cluster, cluster.ClusterURL()}} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t, tc.url)
			ctx := ctxT(t, 10*time.Second)
			sender := fmt.Sprintf("stale-%s-%d", tc.name, time.Now().UnixNano())
			index := "hookonce:pending:{" + sender + "}"

			// A Defer by a stranger is refused.
			mustClaim(t, s, claimReq(sender, "refused", "h", "A", time.Minute), dedupe.Claimed)
			if err := s.Defer(ctx, sender, "refused", "B", dedupe.DeferRequest{Ack: ack(), RetryFor: time.Hour}); !errors.Is(err, dedupe.ErrNotOwner) {
				t.Fatalf("Defer by a stranger: %v", err)
			}
			if err := s.Complete(ctx, sender, "refused", "A", ack(), att("processed")); err != nil {
				t.Fatal(err)
			}
			// A delivery nobody gave up past its end; its record is then
			// taken as new (past its ttl) and completed synchronously.
			o := mustDeferRedis(t, s, sender, "lapsed", 100*time.Millisecond, 100*time.Millisecond, 0)
			_ = o
			time.Sleep(300 * time.Millisecond)
			mustClaim(t, s, claimReq(sender, "lapsed", "h2", "C", time.Minute), dedupe.Claimed)
			if got, err := s.TakeDue(ctx, sender, "D", time.Minute, 10); err != nil || len(got) != 0 {
				t.Fatalf("TakeDue while the record is claimed anew = %d records, %v", len(got), err)
			}
			if err := s.Complete(ctx, sender, "lapsed", "C", ack(), att("processed")); err != nil {
				t.Fatal(err)
			}
			// And one real delivery, behind the stale entries.
			mustDeferRedis(t, s, sender, "real", time.Hour, time.Hour, 0)

			got, err := s.TakeDue(ctx, sender, "D", time.Minute, 10)
			if err != nil || len(got) != 1 || got[0].Key != "real" {
				t.Fatalf("TakeDue = %v, %v; want [real]", got, err)
			}
			if c, ok := pendingOf(t, s, sender); !ok || c.N != 1 {
				t.Fatalf("PendingCounts = %+v (%v), want 1", c, ok)
			}
			if err := s.SettlePending(ctx, sender, "real", "D", dedupe.PendingSettle{Outcome: dedupe.SettleDelivered, Attempt: att("processed")}); err != nil {
				t.Fatal(err)
			}
			if c, ok := pendingOf(t, s, sender); ok {
				t.Fatalf("PendingCounts after delivery = %+v", c)
			}
			if n := strings.TrimSpace(tc.srv.Do(t, "ZCARD", index)); n != ":0" {
				t.Fatalf("%s keeps %s entries", index, n)
			}
		})
	}
}

// Entries that owe nothing at the head of the index do not hide the due
// deliveries behind them from a TakeDue of a few.
func TestTakeDuePastStaleHead(t *testing.T) {
	srv := redistest.Shared(t)
	s := mustOpen(t, srv.URL())
	sender := fmt.Sprintf("stalehead-%d", time.Now().UnixNano())
	for i := 0; i < 40; i++ {
		srv.Do(t, "ZADD", "hookonce:pending:{"+sender+"}", strconv.Itoa(i), fmt.Sprintf("ghost%02d", i))
	}
	mustDeferRedis(t, s, sender, "real", time.Hour, time.Hour, 0)
	got, err := s.TakeDue(ctxT(t, 5*time.Second), sender, "D", time.Minute, 2)
	if err != nil || len(got) != 1 || got[0].Key != "real" {
		t.Fatalf("TakeDue = %d records, %v; want [real]", len(got), err)
	}
}

// Deliverers on separate connections (as separate processes are) share
// the work: each delivery is taken by one, and all are taken.
func TestTakeDueAcrossStores(t *testing.T) {
	srv := redistest.Shared(t)
	first := mustOpen(t, srv.URL())
	sender := fmt.Sprintf("across-%d", time.Now().UnixNano())
	const events = 30
	for i := 0; i < events; i++ {
		mustDeferRedis(t, first, sender, fmt.Sprintf("e%02d", i), time.Hour, time.Hour, 0)
	}
	var mu sync.Mutex
	taken := map[string]int{}
	var wg sync.WaitGroup
	for d := 0; d < 4; d++ {
		s := mustOpen(t, srv.URL())
		wg.Add(1)
		go func(owner string) {
			defer wg.Done()
			for {
				recs, err := s.TakeDue(ctxT(t, 5*time.Second), sender, owner, time.Minute, 3)
				if err != nil {
					t.Errorf("TakeDue: %v", err)
					return
				}
				if len(recs) == 0 {
					return
				}
				mu.Lock()
				for _, r := range recs {
					taken[r.Key]++
				}
				mu.Unlock()
			}
		}(fmt.Sprintf("deliverer-%d", d))
	}
	wg.Wait()
	if len(taken) != events {
		t.Fatalf("taken %d distinct deliveries, want %d", len(taken), events)
	}
	for k, n := range taken {
		if n != 1 {
			t.Fatalf("%s taken %d times", k, n)
		}
	}
}

// A purge by received time keeps records that owe a delivery.
func TestPurgeBeforeKeepsPending(t *testing.T) {
	srv := redistest.Start(t) // alone: Purge is store-wide
	s := mustOpen(t, srv.URL())
	mustDeferRedis(t, s, "purge", "owed", time.Hour, time.Hour, 0)
	mustClaim(t, s, claimReq("purge", "plain", "h", "P", time.Minute), dedupe.Claimed)
	if err := s.Complete(ctxT(t, 5*time.Second), "purge", "plain", "P", ack(), att("processed")); err != nil {
		t.Fatal(err)
	}
	n, err := s.Purge(ctxT(t, 5*time.Second), dedupe.PurgeRequest{ReceivedBefore: time.Now().Add(time.Minute)})
	if err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want 1 (the plain record)", n, err)
	}
	if rec, err := s.Get(ctxT(t, 5*time.Second), "purge", "owed"); err != nil || rec.Pending == nil {
		t.Fatalf("owed record after purge: %+v %v", rec, err)
	}
}

// Over a stalled replication link a Defer, a renewal and a settle are
// applied on the primary but reported as not confirmed, as a completion is;
// a take is given back, as an unconfirmed claim is.
func TestWaitReplicasPending(t *testing.T) {
	primary, link := redistest.StartPrimaryWithReplica(t)
	s := mustOpen(t, primary.URL()+"?wait_replicas=1&wait_replicas_timeout=1500ms") // a loaded machine confirms well within it; a stalled link never
	sender := fmt.Sprintf("waitpending-%d", time.Now().UnixNano())
	ctx := ctxT(t, 30*time.Second)
	mustClaim(t, s, claimReq(sender, "k", "h", "A", time.Minute), dedupe.Claimed)
	link.Stall()
	err := s.Defer(ctx, sender, "k", "A", dedupe.DeferRequest{Ack: ack(), RetryFor: time.Hour, Lease: time.Minute})
	if !errors.Is(err, dedupe.ErrNotConfirmed) || !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("Defer over a stalled link: err = %v, want ErrNotConfirmed and ErrUnavailable", err)
	}
	if err := s.RenewPending(ctx, sender, "k", "A", time.Minute); !errors.Is(err, dedupe.ErrNotConfirmed) {
		t.Fatalf("RenewPending over a stalled link: err = %v, want ErrNotConfirmed", err)
	}
	err = s.SettlePending(ctx, sender, "k", "A", dedupe.PendingSettle{Outcome: dedupe.SettleRetry, Attempt: att("site_error"), RetryIn: time.Second})
	if !errors.Is(err, dedupe.ErrNotConfirmed) {
		t.Fatalf("SettlePending over a stalled link: err = %v, want ErrNotConfirmed", err)
	}
	link.Resume()
	rec, err := s.Get(ctx, sender, "k")
	if err != nil || rec.Pending == nil || rec.Pending.Tries != 1 {
		t.Fatalf("on the primary: %+v %v", rec.Pending, err)
	}

	// A take is a claim of the delivery: not confirmed, it is given back
	// (due at once for the next deliverer), not handed out.
	time.Sleep(time.Until(rec.Pending.NextAt.Add(50 * time.Millisecond)))
	link.Stall()
	if got, err := s.TakeDue(ctx, sender, "B", time.Minute, 5); !errors.Is(err, dedupe.ErrNotConfirmed) || len(got) != 0 {
		t.Fatalf("TakeDue over a stalled link = %d records, %v; want none and ErrNotConfirmed", len(got), err)
	}
	if rec, err := s.Get(ctx, sender, "k"); err != nil || rec.Pending == nil || rec.Pending.Owner != "" {
		t.Fatalf("after the unconfirmed take: %+v %v", rec.Pending, err)
	}
	link.Resume()
	for try := 1; ; try++ {
		got, err := s.TakeDue(ctx, sender, "C", time.Minute, 5)
		if err == nil && len(got) == 1 {
			break
		}
		if err != nil && !errors.Is(err, dedupe.ErrNotConfirmed) || try == 30 {
			t.Fatalf("TakeDue %d once the link is back: %d records, %v", try, len(got), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// BenchmarkDurableAck: a new event's claim and its end on the request path,
// completed (synchronous acknowledgement) or deferred (durable), one sender
// at a time, on loopback (single: the append-only file on, fsync every
// second; cluster: a one-node cluster, where Defer indexes first).
//
//	go test ./dedupe/redis -run '^$' -bench DurableAck
func BenchmarkDurableAck(b *testing.B) {
	srv := redistest.Start(b, "--appendonly", "yes", "--appendfsync", "everysec")
	cluster := redistest.StartCluster(b)
	for _, tc := range []struct {
		name string
		url  string
	}{{"single", srv.URL()}, {"cluster", cluster.ClusterURL()}} {
		s, err := redis.Open(context.Background(), tc.url)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		sender := fmt.Sprintf("bench-%d", time.Now().UnixNano())
		ctx := context.Background()
		for _, end := range []string{"complete", "defer"} {
			b.Run(tc.name+"/"+end, func(b *testing.B) {
				run := time.Now().UnixNano()
				for i := 0; i < b.N; i++ {
					key := fmt.Sprintf("%s-%d-%d", end, run, i)
					r := dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: "h", Owner: key, TTL: time.Hour, Lease: time.Minute}
					if _, err := s.Claim(ctx, r); err != nil {
						b.Fatal(err)
					}
					if end == "complete" {
						err = s.Complete(ctx, sender, key, key, ack(), dedupe.Attempt{Outcome: "processed"})
					} else {
						err = s.Defer(ctx, sender, key, key, dedupe.DeferRequest{Ack: ack(), RetryFor: time.Hour, Lease: time.Minute})
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
