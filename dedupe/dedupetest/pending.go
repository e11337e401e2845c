package dedupetest

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// RunPendingConformance runs every guarantee of dedupe.Deferrer (durable
// deliveries) against newStore's backend, whose stores must implement it.
func RunPendingConformance(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s dedupe.Store, d dedupe.Deferrer, sender string)
	}{
		{"DeferAnswersRepeats", testDeferAnswersRepeats},
		{"DeferFencedByOwner", testDeferFencedByOwner},
		{"DeferHeldThenTakenAfterLease", testDeferHeldThenTaken},
		{"TakeDueOneWinner", testTakeDueOneWinner},
		{"RetryWaitsItsTurn", testRetryWaitsItsTurn},
		{"DeliveredClears", testDeliveredClears},
		{"GiveUpReleases", testGiveUpReleases},
		{"HoldUnknown", testPendingHold},
		{"RenewPendingFenced", testRenewPendingFenced},
		{"CountsAndList", testPendingCountsAndList},
		{"FreeForgetPurge", testPendingFreeForgetPurge},
		{"ExpiredClaimedAsNew", testPendingExpiredClaimedAsNew},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			d, ok := s.(dedupe.Deferrer)
			if !ok {
				t.Fatalf("%T does not implement dedupe.Deferrer", s)
			}
			sender := fmt.Sprintf("pend%d-%d", i, time.Now().UnixNano())
			tt.fn(t, s, d, sender)
		})
	}
}

func keptReq(sender, key, hash, own string) dedupe.ClaimRequest {
	r := req(sender, key, hash, own)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Signature", "sig-"+key)
	r.Request = &dedupe.StoredRequest{Method: http.MethodPost, URI: "/hook?shop=1", Header: h, RemoteAddr: "203.0.113.7:51234"}
	r.RequestBody = []byte(`{"id":"` + key + `","amount":"10.00"}`)
	r.TTL = 2 * time.Hour
	return r
}

func ackResponse() dedupe.Response {
	h := http.Header{}
	h.Set("Content-Type", "text/plain")
	return dedupe.Response{Status: 200, Header: h, Body: []byte("OK77")}
}

// mustDefer claims key as new and defers it.
func mustDefer(t *testing.T, s dedupe.Store, d dedupe.Deferrer, sender, key string, lease time.Duration) string {
	t.Helper()
	o := owner()
	mustClaim(t, s, keptReq(sender, key, "h-"+key, o), dedupe.Claimed)
	if err := d.Defer(ctxT(t), sender, key, o, dedupe.DeferRequest{Ack: ackResponse(), RetryFor: time.Hour, Lease: lease}); err != nil {
		t.Fatalf("Defer(%s/%s): %v", sender, key, err)
	}
	return o
}

func mustTake(t *testing.T, d dedupe.Deferrer, sender, own string, lease time.Duration, n int) []dedupe.Record {
	t.Helper()
	recs, err := d.TakeDue(ctxT(t), sender, own, lease, n)
	if err != nil {
		t.Fatalf("TakeDue(%s): %v", sender, err)
	}
	return recs
}

func mustSettle(t *testing.T, d dedupe.Deferrer, sender, key, own string, st dedupe.PendingSettle) {
	t.Helper()
	if err := d.SettlePending(ctxT(t), sender, key, own, st); err != nil {
		t.Fatalf("SettlePending(%s/%s): %v", sender, key, err)
	}
}

func testDeferAnswersRepeats(t *testing.T, s dedupe.Store, d dedupe.Deferrer, sender string) {
	before := time.Now().Add(-2 * time.Second)
	mustDefer(t, s, d, sender, "evt", 0)
	rec := mustGet(t, s, sender, "evt")
	if rec.State != dedupe.StateDone || rec.Owner != "" {
		t.Fatalf("deferred record: state %s owner %q, want done and no owner", rec.State, rec.Owner)
	}
	sameResponse(t, rec.Response, ackResponse())
	p := rec.Pending
	if p == nil {
		t.Fatal("deferred record has no Pending")
	}
	if p.Since.Before(before) || p.NextAt.Before(before) || p.Tries != 0 || p.Owner != "" {
		t.Fatalf("pending = %+v, want since/next now, 0 tries, no owner", *p)
	}
	if d := p.Until.Sub(p.Since); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("pending until - since = %v, want retry_for (1h)", d)
	}
	if rec.ExpiresAt.Before(p.Until) {
		t.Fatalf("expires %v before the pending delivery's end %v", rec.ExpiresAt, p.Until)
	}
	if rec.Request == nil || !bytes.Contains(rec.RequestBody, []byte(`"id":"evt"`)) {
		t.Fatalf("kept request lost: %+v %q", rec.Request, rec.RequestBody)
	}
	// An exact repeat is answered with the acknowledgement; another
	// payload is a conflict.
	res := mustClaim(t, s, keptReq(sender, "evt", "h-evt", owner()), dedupe.Duplicate)
	sameResponse(t, res.Record.Response, ackResponse())
	mustClaim(t, s, keptReq(sender, "evt", "other", owner()), dedupe.Conflicting)
}

func testDeferFencedByOwner(t *testing.T, s dedupe.Store, d dedupe.Deferrer, sender string) {
	o := owner()
	mustClaim(t, s, keptReq(sender, "evt", "h1", o), dedupe.Claimed)
	dr := dedupe.DeferRequest{Ack: ackResponse(), RetryFor: time.Hour}
	if err := d.Defer(ctxT(t), sender, "evt", owner(), dr); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("Defer by a stranger: err = %v, want ErrNotOwner", err)
	}
	if err := d.Defer(ctxT(t), sender, "nothing", o, dr); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("Defer of no record: err = %v, want ErrNotOwner", err)
	}
	if rec := mustGet(t, s, sender, "evt"); rec.State != dedupe.StateProcessing || rec.Pending != nil {
		t.Fatalf("after refused Defer: state %s pending %v", rec.State, rec.Pending)
	}
	if err := d.Defer(ctxT(t), sender, "evt", o, dr); err != nil {
		t.Fatalf("Defer: %v", err)
	}
	// Deferred once: the claim is over, a second Defer finds none, nor
	// do its owner's Complete, Hold and Release.
	if err := d.Defer(ctxT(t), sender, "evt", o, dr); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("second Defer: err = %v, want ErrNotOwner", err)
	}
	if err := s.Complete(ctxT(t), sender, "evt", o, sampleResponse(), att("processed")); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("Complete after Defer: err = %v, want ErrNotOwner", err)
	}
	if err := s.Hold(ctxT(t), sender, "evt", o, att("ambiguous")); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("Hold after Defer: err = %v, want ErrNotOwner", err)
	}
	if err := s.Release(ctxT(t), sender, "evt", o, att("released")); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("Release after Defer: err = %v, want ErrNotOwner", err)
	}
	if rec := mustGet(t, s, sender, "evt"); rec.State != dedupe.StateDone || rec.Pending == nil {
		t.Fatalf("after the old owner's writes: state %s pending %+v", rec.State, rec.Pending)
	}
	// A completed claim is not deferred.
	o2 := owner()
	mustClaim(t, s, keptReq(sender, "done", "h1", o2), dedupe.Claimed)
	if err := s.Complete(ctxT(t), sender, "done", o2, sampleResponse(), att("processed")); err != nil {
		t.Fatal(err)
	}
	if err := d.Defer(ctxT(t), sender, "done", o2, dr); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("Defer of a done record: err = %v, want ErrNotOwner", err)
	}
}

func testDeferHeldThenTaken(t *testing.T, s dedupe.Store, d dedupe.Deferrer, sender string) {
	first := mustDefer(t, s, d, sender, "evt", 300*time.Millisecond)
	rec := mustGet(t, s, sender, "evt")
	if rec.Pending == nil || rec.Pending.Owner != first {
		t.Fatalf("pending = %+v, want held by the claim's owner", rec.Pending)
	}
	if got := mustTake(t, d, sender, owner(), time.Minute, 10); len(got) != 0 {
		t.Fatalf("TakeDue took a delivery under a live lease: %v", keys(got))
	}
	time.Sleep(600 * time.Millisecond)
	second := owner()
	got := mustTake(t, d, sender, second, time.Minute, 10)
	if len(got) != 1 || got[0].Key != "evt" {
		t.Fatalf("TakeDue after the lease = %v, want [evt]", keys(got))
	}
	g := got[0]
	if g.Pending == nil || g.Pending.Owner != second || g.Request == nil || g.Request.Method != http.MethodPost ||
		g.Request.URI != "/hook?shop=1" || g.Request.Header.Get("X-Signature") != "sig-evt" || g.Request.RemoteAddr != "203.0.113.7:51234" || !bytes.Contains(g.RequestBody, []byte(`"id":"evt"`)) ||
		g.PayloadHash != "h-evt" {
		t.Fatalf("taken record = %+v (pending %+v)", g, g.Pending)
	}
	// The first deliverer wakes up: every write it tries is refused.
	if err := d.RenewPending(ctxT(t), sender, "evt", first, time.Minute); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("stale RenewPending: err = %v, want ErrNotOwner", err)
	}
	for _, out := range []dedupe.PendingOutcome{dedupe.SettleDelivered, dedupe.SettleRetry, dedupe.SettleGiveUp, dedupe.SettleHold} {
		if err := d.SettlePending(ctxT(t), sender, "evt", first, dedupe.PendingSettle{Outcome: out, Attempt: att("x")}); !errors.Is(err, dedupe.ErrNotOwner) {
			t.Fatalf("stale SettlePending(%d): err = %v, want ErrNotOwner", out, err)
		}
	}
	if rec := mustGet(t, s, sender, "evt"); rec.Pending == nil || rec.Pending.Owner != second || len(rec.Attempts) != 0 {
		t.Fatalf("after stale writes: pending %+v attempts %d", rec.Pending, len(rec.Attempts))
	}
}

func testTakeDueOneWinner(t *testing.T, s dedupe.Store, d dedupe.Deferrer, sender string) {
	const events = 6
	for i := 0; i < events; i++ {
		mustDefer(t, s, d, sender, fmt.Sprintf("e%d", i), 0)
	}
	var mu sync.Mutex
	taken := map[string]int{}
	var wg sync.WaitGroup
	for g := 0; g < 12; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs, err := d.TakeDue(ctxT(t), sender, owner(), time.Minute, 2)
			if err != nil {
				t.Errorf("TakeDue: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range recs {
				taken[r.Key]++
			}
		}()
	}
	wg.Wait()
	if len(taken) != events {
		t.Fatalf("taken %d distinct deliveries, want %d: %v", len(taken), events, taken)
	}
	for k, n := range taken {
		if n != 1 {
			t.Fatalf("delivery %s taken %d times", k, n)
		}
	}
	if got := mustTake(t, d, sender, owner(), time.Minute, 10); len(got) != 0 {
		t.Fatalf("taken again while leased: %v", keys(got))
	}
	// n bounds a take.
	other := sender + "-n"
	for i := 0; i < 3; i++ {
		mustDefer(t, s, d, other, fmt.Sprintf("e%d", i), 0)
	}
	if got := mustTake(t, d, other, owner(), time.Minute, 2); len(got) != 2 {
		t.Fatalf("TakeDue(n=2) took %d", len(got))
	}
}

func testRetryWaitsItsTurn(t *testing.T, s dedupe.Store, d dedupe.Deferrer, sender string) {
	o := mustDefer(t, s, d, sender, "evt", time.Minute)
	a := att("site_error")
	a.Status = 502
	mustSettle(t, d, sender, "evt", o, dedupe.PendingSettle{Outcome: dedupe.SettleRetry, Attempt: a, RetryIn: 700 * time.Millisecond})
	rec := mustGet(t, s, sender, "evt")
	if rec.State != dedupe.StateDone || rec.Pending == nil || rec.Pending.Tries != 1 || rec.Pending.Owner != "" || len(rec.Attempts) != 1 {
		t.Fatalf("after retry: state %s pending %+v attempts %d", rec.State, rec.Pending, len(rec.Attempts))
	}
	sameAttempt(t, rec.Attempts[0], a)
	sameResponse(t, rec.Response, ackResponse())
	if got := mustTake(t, d, sender, owner(), time.Minute, 10); len(got) != 0 {
		t.Fatalf("taken before its turn: %v", keys(got))
	}
	// The retry's settle gave the lease up: no waiting for it.
	if err := d.RenewPending(ctxT(t), sender, "evt", o, time.Minute); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("RenewPending after the settle: err = %v, want ErrNotOwner", err)
	}
	time.Sleep(1200 * time.Millisecond)
	got := mustTake(t, d, sender, owner(), time.Minute, 10)
	if len(got) != 1 || got[0].Pending.Tries != 1 {
		t.Fatalf("after its turn: %v", keys(got))
	}
}

func testDeliveredClears(t *testing.T, s dedupe.Store, d dedupe.Deferrer, sender string) {
	o := mustDefer(t, s, d, sender, "kept", time.Minute)
	mustSettle(t, d, sender, "kept", o, dedupe.PendingSettle{Outcome: dedupe.SettleDelivered, Attempt: att("processed")})
	rec := mustGet(t, s, sender, "kept")
	if rec.State != dedupe.StateDone || rec.Pending != nil || len(rec.Attempts) != 1 {
		t.Fatalf("delivered: state %s pending %+v attempts %d", rec.State, rec.Pending, len(rec.Attempts))
	}
	sameResponse(t, rec.Response, ackResponse())

	o = mustDefer(t, s, d, sender, "site", time.Minute)
	site := sampleResponse()
	mustSettle(t, d, sender, "site", o, dedupe.PendingSettle{Outcome: dedupe.SettleDelivered, Attempt: att("processed"), Response: &site})
	rec = mustGet(t, s, sender, "site")
	if rec.Pending != nil {
		t.Fatalf("delivered: pending %+v", rec.Pending)
	}
	sameResponse(t, rec.Response, site)
	res := mustClaim(t, s, keptReq(sender, "site", "h-site", owner()), dedupe.Duplicate)
	sameResponse(t, res.Record.Response, site)
	if err := d.SettlePending(ctxT(t), sender, "site", o, dedupe.PendingSettle{Outcome: dedupe.SettleRetry, Attempt: att("x")}); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("settle after delivered: err = %v, want ErrNotOwner", err)
	}
	if got := mustTake(t, d, sender, owner(), time.Minute, 10); len(got) != 0 {
		t.Fatalf("delivered ones taken: %v", keys(got))
	}
}

func testGiveUpReleases(t *testing.T, s dedupe.Store, d dedupe.Deferrer, sender string) {
	o := mustDefer(t, s, d, sender, "evt", time.Minute)
	a := att("not_success")
	a.Status = 422
	mustSettle(t, d, sender, "evt", o, dedupe.PendingSettle{Outcome: dedupe.SettleGiveUp, Attempt: a})
	rec := mustGet(t, s, sender, "evt")
	if rec.State != dedupe.StateReleased || rec.Pending != nil || rec.Response != nil || rec.Request == nil || rec.RequestBody == nil {
		t.Fatalf("given up: state %s pending %+v response %v request %v", rec.State, rec.Pending, rec.Response, rec.Request)
	}
	sameAttempt(t, rec.LastAttempt(), a)
	// Released: the next delivery runs it, as after any freed claim.
	mustClaim(t, s, keptReq(sender, "evt", "h-evt", owner()), dedupe.Claimed)
}

func testPendingHold(t *testing.T, s dedupe.Store, d dedupe.Deferrer, sender string) {
	o := mustDefer(t, s, d, sender, "evt", time.Minute)
	mustSettle(t, d, sender, "evt", o, dedupe.PendingSettle{Outcome: dedupe.SettleHold, Attempt: att("ambiguous")})
	rec := mustGet(t, s, sender, "evt")
	if rec.State != dedupe.StateUnknown || rec.Pending != nil || rec.Response != nil || rec.Request == nil {
		t.Fatalf("held: state %s pending %+v response %v request %v", rec.State, rec.Pending, rec.Response, rec.Request)
	}
	mustClaim(t, s, keptReq(sender, "evt", "h-evt", owner()), dedupe.Held)
}

func testRenewPendingFenced(t *testing.T, s dedupe.Store, d dedupe.Deferrer, sender string) {
	o := mustDefer(t, s, d, sender, "evt", 300*time.Millisecond)
	for i := 0; i < 6; i++ {
		time.Sleep(100 * time.Millisecond)
		if err := d.RenewPending(ctxT(t), sender, "evt", o, 300*time.Millisecond); err != nil {
			t.Fatalf("RenewPending %d: %v", i, err)
		}
	}
	if got := mustTake(t, d, sender, owner(), time.Minute, 10); len(got) != 0 {
		t.Fatalf("taken while renewed: %v", keys(got))
	}
	if err := d.RenewPending(ctxT(t), sender, "evt", owner(), time.Minute); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("RenewPending by a stranger: err = %v, want ErrNotOwner", err)
	}
	if err := d.RenewPending(ctxT(t), sender, "none", o, time.Minute); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("RenewPending of no record: err = %v, want ErrNotOwner", err)
	}
}

func testPendingCountsAndList(t *testing.T, s dedupe.Store, d dedupe.Deferrer, sender string) {
	first := time.Now()
	mustDefer(t, s, d, sender, "a", 0)
	time.Sleep(20 * time.Millisecond)
	mustDefer(t, s, d, sender, "b", 0)
	o := owner()
	mustClaim(t, s, keptReq(sender, "plain", "h", o), dedupe.Claimed)
	if err := s.Complete(ctxT(t), sender, "plain", o, sampleResponse(), att("processed")); err != nil {
		t.Fatal(err)
	}
	counts, err := d.PendingCounts(ctxT(t))
	if err != nil {
		t.Fatalf("PendingCounts: %v", err)
	}
	var mine *dedupe.PendingCount
	for i := range counts {
		if counts[i].Sender == sender {
			mine = &counts[i]
		}
	}
	if mine == nil || mine.N != 2 {
		t.Fatalf("PendingCounts = %+v, want 2 for %s", counts, sender)
	}
	if mine.Oldest.Before(first.Add(-2*time.Second)) || mine.Oldest.After(first.Add(2*time.Second)) {
		t.Fatalf("oldest = %v, want about %v", mine.Oldest, first)
	}
	recs, err := s.List(ctxT(t), dedupe.ListFilter{Sender: sender, Pending: true})
	if err != nil {
		t.Fatalf("List pending: %v", err)
	}
	if got := fmt.Sprint(keys(recs)); got != "[b a]" {
		t.Fatalf("List(pending) = %s, want [b a]", got)
	}
	all, err := s.List(ctxT(t), dedupe.ListFilter{Sender: sender})
	if err != nil || len(all) != 3 {
		t.Fatalf("List = %v, %v; want 3", keys(all), err)
	}
	for _, r := range all {
		if (r.Key == "plain") != (r.Pending == nil) {
			t.Fatalf("List: %s pending %+v", r.Key, r.Pending)
		}
	}
	// Delivered ones leave the count.
	for _, r := range mustTake(t, d, sender, o, time.Minute, 10) {
		mustSettle(t, d, sender, r.Key, o, dedupe.PendingSettle{Outcome: dedupe.SettleDelivered, Attempt: att("processed")})
	}
	counts, err = d.PendingCounts(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range counts {
		if c.Sender == sender && c.N != 0 {
			t.Fatalf("after delivery: %+v", c)
		}
	}
}

func testPendingFreeForgetPurge(t *testing.T, s dedupe.Store, d dedupe.Deferrer, sender string) {
	o := mustDefer(t, s, d, sender, "freed", time.Minute)
	if _, err := s.Free(ctxT(t), sender, "freed", dedupe.OperatorRelease(time.Now())); err != nil {
		t.Fatalf("Free: %v", err)
	}
	if rec := mustGet(t, s, sender, "freed"); rec.State != dedupe.StateReleased || rec.Pending != nil {
		t.Fatalf("freed: state %s pending %+v", rec.State, rec.Pending)
	}
	if err := d.SettlePending(ctxT(t), sender, "freed", o, dedupe.PendingSettle{Outcome: dedupe.SettleDelivered, Attempt: att("processed")}); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("settle after Free: err = %v, want ErrNotOwner", err)
	}

	mustDefer(t, s, d, sender, "forgotten", 0)
	if err := s.Forget(ctxT(t), sender, "forgotten"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	mustNotFound(t, s, sender, "forgotten")
	if got := mustTake(t, d, sender, owner(), time.Minute, 10); len(got) != 0 {
		t.Fatalf("taken after Free and Forget: %v", keys(got))
	}

	// Past its ExpiresAt (retry_for shorter than a test's patience) an
	// owed delivery is still never purged.
	o = owner()
	r := keptReq(sender, "owed", "h", o)
	r.TTL = 200 * time.Millisecond
	mustClaim(t, s, r, dedupe.Claimed)
	if err := d.Defer(ctxT(t), sender, "owed", o, dedupe.DeferRequest{Ack: ackResponse(), RetryFor: 300 * time.Millisecond}); err != nil {
		t.Fatalf("Defer: %v", err)
	}
	time.Sleep(700 * time.Millisecond)
	if _, err := s.Purge(ctxT(t), dedupe.PurgeRequest{}); err != nil {
		t.Fatalf("Purge: %v", err)
	}
	if rec := mustGet(t, s, sender, "owed"); rec.Pending == nil {
		t.Fatal("Purge removed an owed delivery")
	}
}

// A record past its ExpiresAt (extended to Until by Defer) is claimed as
// new, like any expired record, and keeps no Pending of the old one.
func testPendingExpiredClaimedAsNew(t *testing.T, s dedupe.Store, d dedupe.Deferrer, sender string) {
	o := owner()
	r := keptReq(sender, "evt", "h", o)
	r.TTL = 200 * time.Millisecond
	mustClaim(t, s, r, dedupe.Claimed)
	if err := d.Defer(ctxT(t), sender, "evt", o, dedupe.DeferRequest{Ack: ackResponse(), RetryFor: 300 * time.Millisecond}); err != nil {
		t.Fatalf("Defer: %v", err)
	}
	time.Sleep(700 * time.Millisecond)
	mustClaim(t, s, keptReq(sender, "evt", "h", owner()), dedupe.Claimed)
	if rec := mustGet(t, s, sender, "evt"); rec.State != dedupe.StateProcessing || rec.Pending != nil {
		t.Fatalf("claimed over an expired owed record: state %s pending %+v", rec.State, rec.Pending)
	}
	if got := mustTake(t, d, sender, owner(), time.Minute, 10); len(got) != 0 {
		t.Fatalf("the old delivery is still taken: %v", keys(got))
	}
}
