// Package dedupetest holds the conformance suite every dedupe.Store backend
// runs unchanged against a real server (or file, for SQLite).
package dedupetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// NewStore opens a store for one subtest. It may return the same underlying
// database for every call: the suite keeps subtests apart by sender name and
// runs them one after another.
type NewStore func(t *testing.T) dedupe.Store

const (
	longLease = time.Minute
	longTTL   = time.Hour
)

var ownerSeq atomic.Int64

func owner() string { return fmt.Sprintf("owner-%d-%d", time.Now().UnixNano(), ownerSeq.Add(1)) }

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func req(sender, key, hash, own string) dedupe.ClaimRequest {
	return dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: hash, Owner: own, Lease: longLease, TTL: longTTL}
}

func mustClaim(t *testing.T, s dedupe.Store, r dedupe.ClaimRequest, want dedupe.Found) dedupe.ClaimResult {
	t.Helper()
	got, err := s.Claim(ctxT(t), r)
	if err != nil {
		t.Fatalf("Claim(%s/%s): %v", r.Sender, r.Key, err)
	}
	if got.Found != want {
		t.Fatalf("Claim(%s/%s) outcome = %v, want %v (record state %q)", r.Sender, r.Key, got.Found, want, got.Record.State)
	}
	return got
}

func mustGet(t *testing.T, s dedupe.Store, sender, key string) dedupe.Record {
	t.Helper()
	rec, err := s.Get(ctxT(t), sender, key)
	if err != nil {
		t.Fatalf("Get(%s/%s): %v", sender, key, err)
	}
	return rec
}

func mustNotFound(t *testing.T, s dedupe.Store, sender, key string) {
	t.Helper()
	_, err := s.Get(ctxT(t), sender, key)
	if !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("Get(%s/%s) err = %v, want ErrNotFound", sender, key, err)
	}
}

// att is an attempt with every field set, so a backend that drops one is
// caught; times are whole milliseconds, as every backend keeps them.
func att(outcome string) dedupe.Attempt {
	return dedupe.Attempt{At: time.Now().Truncate(time.Millisecond).UTC(), By: dedupe.AttemptBySender, Outcome: outcome,
		Status: 200, Duration: 1500 * time.Millisecond, Replica: "replica-1", Wait: 250 * time.Millisecond}
}

func sameAttempt(t *testing.T, got, want dedupe.Attempt) {
	t.Helper()
	if !got.At.Equal(want.At) || got.By != want.By || got.Outcome != want.Outcome || got.Status != want.Status ||
		got.Duration != want.Duration || got.Replica != want.Replica || got.Wait != want.Wait {
		t.Fatalf("attempt = %+v, want %+v", got, want)
	}
}

func sampleResponse() dedupe.Response {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Add("X-Multi", "a")
	h.Add("X-Multi", "b")
	return dedupe.Response{Status: 201, Header: h, Body: []byte("{\"order\":42}\x00\xff binary tail")}
}

func sameResponse(t *testing.T, got *dedupe.Response, want dedupe.Response) {
	t.Helper()
	if got == nil {
		t.Fatal("response is nil")
	}
	if got.Status != want.Status || !bytes.Equal(got.Body, want.Body) || got.Truncated != want.Truncated {
		t.Fatalf("response = %d %q truncated=%v, want %d %q truncated=%v", got.Status, got.Body, got.Truncated, want.Status, want.Body, want.Truncated)
	}
	for k, v := range want.Header {
		if fmt.Sprint(got.Header[k]) != fmt.Sprint(v) {
			t.Fatalf("header %s = %v, want %v (all: %v)", k, got.Header[k], v, got.Header)
		}
	}
	if len(got.Header) != len(want.Header) {
		t.Fatalf("headers = %v, want %v", got.Header, want.Header)
	}
}

// RunConformance runs every guarantee of dedupe.Store against newStore's
// backend.
func RunConformance(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s dedupe.Store, sender string)
	}{
		{"NewClaim", testNewClaim},
		{"CompleteThenDuplicate", testCompleteThenDuplicate},
		{"ConflictKeepsOriginal", testConflictKeepsOriginal},
		{"InProgress", testInProgress},
		{"ReleaseFreesKey", testReleaseFreesKey},
		{"AttemptsBounded", testAttemptsBounded},
		{"HoldKeepsAttempt", testHoldKeepsAttempt},
		{"StoredRequestKept", testStoredRequestKept},
		{"ParallelReleasedOneWinner", testParallelReleasedOneWinner},
		{"WritesFencedByOwner", testWritesFencedByOwner},
		{"TakeoverAfterLease", testTakeoverAfterLease},
		{"RenewKeepsClaim", testRenewKeepsClaim},
		{"HoldUnknown", testHoldUnknown},
		{"ExpiredRecordIsNew", testExpiredRecordIsNew},
		{"SendersAreNamespaces", testSendersAreNamespaces},
		{"Hits", testHits},
		{"ListAndConflicts", testListAndConflicts},
		{"Forget", testForget},
		{"FreeKeepsHistory", testFreeKeepsHistory},
		{"Purge", testPurge},
		{"RequestBodyKept", testRequestBodyKept},
		{"TruncatedAndEmpty", testTruncatedAndEmpty},
		{"CancelledContext", testCancelledContext},
		{"ProbeLeavesNothing", testProbeLeavesNothing},
		{"ParallelClaimOneWinner", testParallelClaimOneWinner},
		{"ParallelTakeoverOneWinner", testParallelTakeoverOneWinner},
		{"ConflictPayloadKept", testConflictPayloadKept},
		{"AcceptConflictOnce", testAcceptConflictOnce},
		{"AcceptOncePerPayload", testAcceptOncePerPayload},
		{"KeyPart", testKeyPart},
		{"FingerprintKept", testFingerprintKept},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			sender := fmt.Sprintf("conf%d-%d", i, time.Now().UnixNano())
			tt.fn(t, s, sender)
		})
	}
	t.Run("CloseTwice", func(t *testing.T) {
		s := newStore(t)
		if err := s.Close(); err != nil {
			t.Fatalf("first Close: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}

func testNewClaim(t *testing.T, s dedupe.Store, sender string) {
	before := time.Now().Add(-time.Minute)
	o := owner()
	res := mustClaim(t, s, req(sender, "evt_1", "h1", o), dedupe.Claimed)
	rec := mustGet(t, s, sender, "evt_1")
	if rec.State != dedupe.StateProcessing || rec.Owner != o || rec.PayloadHash != "h1" {
		t.Fatalf("record = %+v, want processing owned by %s with hash h1", rec, o)
	}
	if rec.Response != nil {
		t.Fatalf("processing record has a response: %+v", rec.Response)
	}
	if rec.ReceivedAt.Before(before) || rec.ReceivedAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("received_at = %v, not about now", rec.ReceivedAt)
	}
	if !rec.LeaseUntil.After(rec.ReceivedAt) || !rec.ExpiresAt.After(rec.LeaseUntil) {
		t.Fatalf("times out of order: received %v lease %v expires %v", rec.ReceivedAt, rec.LeaseUntil, rec.ExpiresAt)
	}
	if res.Record.Owner != o {
		t.Fatalf("claim result owner = %q, want %q", res.Record.Owner, o)
	}
}

func testCompleteThenDuplicate(t *testing.T, s dedupe.Store, sender string) {
	o := owner()
	mustClaim(t, s, req(sender, "evt", "h1", o), dedupe.Claimed)
	want := sampleResponse()
	if err := s.Complete(ctxT(t), sender, "evt", o, want, att("complete")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	rec := mustGet(t, s, sender, "evt")
	if rec.State != dedupe.StateDone || rec.CompletedAt.IsZero() {
		t.Fatalf("record = %+v, want done with completed_at", rec)
	}
	sameResponse(t, rec.Response, want)
	dup := mustClaim(t, s, req(sender, "evt", "h1", owner()), dedupe.Duplicate)
	sameResponse(t, dup.Record.Response, want)
	// A duplicate writes nothing: the record still belongs to nobody new.
	if again := mustGet(t, s, sender, "evt"); again.State != dedupe.StateDone {
		t.Fatalf("state after duplicate = %s", again.State)
	}
}

func testConflictKeepsOriginal(t *testing.T, s dedupe.Store, sender string) {
	o := owner()
	mustClaim(t, s, req(sender, "evt", "h1", o), dedupe.Claimed)
	// A different payload while processing is a conflict too.
	res := mustClaim(t, s, req(sender, "evt", "h2", owner()), dedupe.Conflicting)
	if res.Record.PayloadHash != "h1" {
		t.Fatalf("conflict result shows hash %q, want the stored h1", res.Record.PayloadHash)
	}
	want := sampleResponse()
	if err := s.Complete(ctxT(t), sender, "evt", o, want, att("complete")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	mustClaim(t, s, req(sender, "evt", "h2", owner()), dedupe.Conflicting)
	rec := mustGet(t, s, sender, "evt")
	if rec.PayloadHash != "h1" || rec.State != dedupe.StateDone {
		t.Fatalf("original overwritten: %+v", rec)
	}
	sameResponse(t, rec.Response, want)
}

func testInProgress(t *testing.T, s dedupe.Store, sender string) {
	o := owner()
	mustClaim(t, s, req(sender, "evt", "h1", o), dedupe.Claimed)
	res := mustClaim(t, s, req(sender, "evt", "h1", owner()), dedupe.InProgress)
	if res.Record.Owner != o {
		t.Fatalf("in-progress result owner = %q, want the holder %q", res.Record.Owner, o)
	}
	if rec := mustGet(t, s, sender, "evt"); rec.Owner != o {
		t.Fatalf("second claimer changed the owner to %q", rec.Owner)
	}
}

func testReleaseFreesKey(t *testing.T, s dedupe.Store, sender string) {
	o := owner()
	mustClaim(t, s, req(sender, "evt", "h1", o), dedupe.Claimed)
	first := att("released")
	first.Status = 503
	if err := s.Release(ctxT(t), sender, "evt", o, first); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// The record stays, released, with what happened.
	rec := mustGet(t, s, sender, "evt")
	if rec.State != dedupe.StateReleased || rec.Owner != "" || rec.PayloadHash != "h1" || len(rec.Attempts) != 1 {
		t.Fatalf("released record = %+v, want state released, no owner, hash h1, 1 attempt", rec)
	}
	sameAttempt(t, rec.Attempts[0], first)
	if err := s.Release(ctxT(t), sender, "evt", o, att("released")); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("second Release = %v, want ErrNotOwner", err)
	}
	if got, err := s.List(ctxT(t), dedupe.ListFilter{Sender: sender, State: dedupe.StateReleased}); err != nil || len(got) != 1 {
		t.Fatalf("List(released) = %d records, %v", len(got), err)
	}
	// The sender's retry is processed; it may even carry another payload now.
	o2 := owner()
	res := mustClaim(t, s, req(sender, "evt", "h2", o2), dedupe.Claimed)
	if res.Record.Owner != o2 {
		t.Fatalf("re-claim owner = %q", res.Record.Owner)
	}
	second := att("processed")
	if err := s.Complete(ctxT(t), sender, "evt", o2, sampleResponse(), second); err != nil {
		t.Fatalf("Complete after release: %v", err)
	}
	rec = mustGet(t, s, sender, "evt")
	if rec.State != dedupe.StateDone || rec.PayloadHash != "h2" || len(rec.Attempts) != 2 {
		t.Fatalf("record = %+v, want done with hash h2 and both attempts", rec)
	}
	sameAttempt(t, rec.Attempts[0], first)
	sameAttempt(t, rec.Attempts[1], second)
	if rec.LastAttempt().Outcome != "processed" {
		t.Fatalf("last attempt = %+v", rec.LastAttempt())
	}
}

// Attempts are bounded: the latest MaxAttempts stay, oldest first.
func testAttemptsBounded(t *testing.T, s dedupe.Store, sender string) {
	const n = dedupe.MaxAttempts + 5
	for i := range n {
		o := owner()
		mustClaim(t, s, req(sender, "evt", "h1", o), dedupe.Claimed)
		a := att("released")
		a.Status = 500 + i
		if err := s.Release(ctxT(t), sender, "evt", o, a); err != nil {
			t.Fatalf("Release %d: %v", i, err)
		}
	}
	rec := mustGet(t, s, sender, "evt")
	if len(rec.Attempts) != dedupe.MaxAttempts {
		t.Fatalf("%d attempts kept, want %d", len(rec.Attempts), dedupe.MaxAttempts)
	}
	if first, last := rec.Attempts[0].Status, rec.LastAttempt().Status; first != 500+n-dedupe.MaxAttempts || last != 500+n-1 {
		t.Fatalf("attempts kept from status %d to %d, want %d to %d", first, last, 500+n-dedupe.MaxAttempts, 500+n-1)
	}
}

// A held claim keeps its attempt too.
func testHoldKeepsAttempt(t *testing.T, s dedupe.Store, sender string) {
	o := owner()
	mustClaim(t, s, req(sender, "evt", "h1", o), dedupe.Claimed)
	a := att("ambiguous")
	a.Status = 504
	if err := s.Hold(ctxT(t), sender, "evt", o, a); err != nil {
		t.Fatal(err)
	}
	rec := mustGet(t, s, sender, "evt")
	if rec.State != dedupe.StateUnknown || len(rec.Attempts) != 1 {
		t.Fatalf("held record = %+v", rec)
	}
	sameAttempt(t, rec.Attempts[0], a)
}

// The claimed request's head is kept with its body, for redelivery.
func testStoredRequestKept(t *testing.T, s dedupe.Store, sender string) {
	r := req(sender, "evt", "h1", owner())
	r.RequestBody = []byte(`{"id":"evt"}`)
	r.Request = &dedupe.StoredRequest{Method: "POST", URI: "/bitrix/tools/sale_ps_result.php?action=pay",
		Header: http.Header{"Content-Type": {"application/json"}, "X-Sig": {"a", "b"}}}
	mustClaim(t, s, r, dedupe.Claimed)
	if err := s.Release(ctxT(t), sender, "evt", r.Owner, att("released")); err != nil {
		t.Fatal(err)
	}
	rec := mustGet(t, s, sender, "evt")
	if string(rec.RequestBody) != `{"id":"evt"}` || rec.Request == nil || rec.Request.Method != "POST" ||
		rec.Request.URI != r.Request.URI || fmt.Sprint(rec.Request.Header) != fmt.Sprint(r.Request.Header) {
		t.Fatalf("kept request = %+v body %q", rec.Request, rec.RequestBody)
	}
	// Without store_request_body nothing is kept.
	mustClaim(t, s, req(sender, "other", "h1", owner()), dedupe.Claimed)
	if rec := mustGet(t, s, sender, "other"); rec.Request != nil || rec.RequestBody != nil {
		t.Fatalf("request kept without being asked: %+v", rec.Request)
	}
}

// Many deliveries of a released event at once: one runs it.
func testParallelReleasedOneWinner(t *testing.T, s dedupe.Store, sender string) {
	o := owner()
	mustClaim(t, s, req(sender, "evt", "h1", o), dedupe.Claimed)
	if err := s.Release(ctxT(t), sender, "evt", o, att("released")); err != nil {
		t.Fatal(err)
	}
	const n = 50
	got := claimAtOnce(t, s, sender, n)
	if got[dedupe.Claimed] != 1 || got[dedupe.InProgress] != n-1 || len(got) != 2 {
		t.Fatalf("%d claimers of a released event: %v, want 1 claimed and %d in_progress", n, got, n-1)
	}
}

func testWritesFencedByOwner(t *testing.T, s dedupe.Store, sender string) {
	o := owner()
	mustClaim(t, s, req(sender, "evt", "h1", o), dedupe.Claimed)
	ctx := ctxT(t)
	stranger := owner()
	checks := map[string]error{
		"Complete": s.Complete(ctx, sender, "evt", stranger, sampleResponse(), att("complete")),
		"Release":  s.Release(ctx, sender, "evt", stranger, att("release")),
		"Hold":     s.Hold(ctx, sender, "evt", stranger, att("hold")),
		"Renew":    s.Renew(ctx, sender, "evt", stranger, longLease),
	}
	for op, err := range checks {
		if !errors.Is(err, dedupe.ErrNotOwner) {
			t.Errorf("%s by a stranger: err = %v, want ErrNotOwner", op, err)
		}
	}
	rec := mustGet(t, s, sender, "evt")
	if rec.State != dedupe.StateProcessing || rec.Owner != o {
		t.Fatalf("stranger's writes changed the record: %+v", rec)
	}
	// Writes on a key nobody holds are fenced too.
	if err := s.Complete(ctx, sender, "nosuch", o, sampleResponse(), att("complete")); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("Complete of a missing record: err = %v, want ErrNotOwner", err)
	}
	mustNotFound(t, s, sender, "nosuch")
	// Once done, the owner cannot complete or release again.
	if err := s.Complete(ctx, sender, "evt", o, sampleResponse(), att("complete")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if err := s.Release(ctx, sender, "evt", o, att("release")); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("Release after done: err = %v, want ErrNotOwner", err)
	}
	if rec := mustGet(t, s, sender, "evt"); rec.State != dedupe.StateDone {
		t.Fatalf("release after done changed state to %s", rec.State)
	}
}

func testTakeoverAfterLease(t *testing.T, s dedupe.Store, sender string) {
	stale := owner()
	r := req(sender, "evt", "h1", stale)
	r.Lease = 150 * time.Millisecond
	mustClaim(t, s, r, dedupe.Claimed)
	time.Sleep(400 * time.Millisecond)
	// A different payload after expiry is still a conflict, not a takeover.
	mustClaim(t, s, req(sender, "evt", "h2", owner()), dedupe.Conflicting)
	fresh := owner()
	res := mustClaim(t, s, req(sender, "evt", "h1", fresh), dedupe.TakenOver)
	if res.Record.Owner != fresh || res.Record.Takeovers != 1 {
		t.Fatalf("takeover result = owner %q takeovers %d, want %q and 1", res.Record.Owner, res.Record.Takeovers, fresh)
	}
	ctx := ctxT(t)
	// The stale owner wakes up: every write it tries is refused.
	if err := s.Complete(ctx, sender, "evt", stale, dedupe.Response{Status: 500}, att("complete")); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("stale Complete: err = %v, want ErrNotOwner", err)
	}
	if err := s.Release(ctx, sender, "evt", stale, att("release")); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("stale Release: err = %v, want ErrNotOwner", err)
	}
	if err := s.Renew(ctx, sender, "evt", stale, longLease); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("stale Renew: err = %v, want ErrNotOwner", err)
	}
	want := sampleResponse()
	if err := s.Complete(ctx, sender, "evt", fresh, want, att("complete")); err != nil {
		t.Fatalf("new owner Complete: %v", err)
	}
	rec := mustGet(t, s, sender, "evt")
	sameResponse(t, rec.Response, want)
	if rec.Takeovers != 1 {
		t.Fatalf("takeovers = %d, want 1", rec.Takeovers)
	}
}

func testRenewKeepsClaim(t *testing.T, s dedupe.Store, sender string) {
	o := owner()
	r := req(sender, "evt", "h1", o)
	r.Lease = 300 * time.Millisecond
	mustClaim(t, s, r, dedupe.Claimed)
	for i := 0; i < 6; i++ {
		time.Sleep(100 * time.Millisecond)
		if err := s.Renew(ctxT(t), sender, "evt", o, 300*time.Millisecond); err != nil {
			t.Fatalf("Renew %d: %v", i, err)
		}
	}
	// 600ms after the claim, twice the lease, it is still held.
	mustClaim(t, s, req(sender, "evt", "h1", owner()), dedupe.InProgress)
	if rec := mustGet(t, s, sender, "evt"); rec.Owner != o {
		t.Fatalf("owner = %q, want %q", rec.Owner, o)
	}
}

func testHoldUnknown(t *testing.T, s dedupe.Store, sender string) {
	o := owner()
	r := req(sender, "evt", "h1", o)
	r.Lease = 100 * time.Millisecond
	mustClaim(t, s, r, dedupe.Claimed)
	if err := s.Hold(ctxT(t), sender, "evt", o, att("hold")); err != nil {
		t.Fatalf("Hold: %v", err)
	}
	time.Sleep(250 * time.Millisecond)
	// Unknown is never taken over by lease expiry: only an operator frees it.
	mustClaim(t, s, req(sender, "evt", "h1", owner()), dedupe.Held)
	mustClaim(t, s, req(sender, "evt", "h2", owner()), dedupe.Conflicting)
	if rec := mustGet(t, s, sender, "evt"); rec.State != dedupe.StateUnknown {
		t.Fatalf("state = %s, want unknown", rec.State)
	}
	if err := s.Forget(ctxT(t), sender, "evt"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	mustClaim(t, s, req(sender, "evt", "h1", owner()), dedupe.Claimed)
}

func testExpiredRecordIsNew(t *testing.T, s dedupe.Store, sender string) {
	o := owner()
	r := req(sender, "evt", "h1", o)
	r.TTL = 300 * time.Millisecond
	r.Lease = 100 * time.Millisecond
	mustClaim(t, s, r, dedupe.Claimed)
	if err := s.Complete(ctxT(t), sender, "evt", o, sampleResponse(), att("complete")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	time.Sleep(600 * time.Millisecond)
	// Past its ttl the record no longer answers for the key, even with
	// another payload.
	fresh := owner()
	res := mustClaim(t, s, req(sender, "evt", "h2", fresh), dedupe.Claimed)
	if res.Record.Owner != fresh || res.Record.Response != nil {
		t.Fatalf("claim over an expired record = %+v", res.Record)
	}
}

func testSendersAreNamespaces(t *testing.T, s dedupe.Store, sender string) {
	mustClaim(t, s, req(sender+"-a", "evt", "h1", owner()), dedupe.Claimed)
	mustClaim(t, s, req(sender+"-b", "evt", "h2", owner()), dedupe.Claimed)
}

func testHits(t *testing.T, s dedupe.Store, sender string) {
	o := owner()
	mustClaim(t, s, req(sender, "evt", "h1", o), dedupe.Claimed)
	if err := s.Complete(ctxT(t), sender, "evt", o, sampleResponse(), att("complete")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	hits := []dedupe.Hit{{Sender: sender, Key: "evt", N: 2}, {Sender: sender, Key: "evt", N: 1}, {Sender: sender, Key: "gone", N: 5}}
	if err := s.AddHits(ctxT(t), hits); err != nil {
		t.Fatalf("AddHits: %v", err)
	}
	if rec := mustGet(t, s, sender, "evt"); rec.Hits != 3 {
		t.Fatalf("hits = %d, want 3", rec.Hits)
	}
	mustNotFound(t, s, sender, "gone")
}

func testListAndConflicts(t *testing.T, s dedupe.Store, sender string) {
	ctx := ctxT(t)
	var owners []string
	for i := 0; i < 5; i++ {
		o := owner()
		owners = append(owners, o)
		mustClaim(t, s, req(sender, fmt.Sprintf("evt%d", i), "h", o), dedupe.Claimed)
		time.Sleep(5 * time.Millisecond)
	}
	for i := 0; i < 3; i++ {
		if err := s.Complete(ctx, sender, fmt.Sprintf("evt%d", i), owners[i], sampleResponse(), att("complete")); err != nil {
			t.Fatalf("Complete: %v", err)
		}
	}
	mustClaim(t, s, req(sender+"-other", "x", "h", owner()), dedupe.Claimed)

	all, err := s.List(ctx, dedupe.ListFilter{Sender: sender})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(all) != 5 || all[0].Key != "evt4" || all[4].Key != "evt0" {
		t.Fatalf("List = %v, want evt4..evt0", keys(all))
	}
	done, err := s.List(ctx, dedupe.ListFilter{Sender: sender, State: dedupe.StateDone})
	if err != nil {
		t.Fatalf("List done: %v", err)
	}
	if len(done) != 3 || done[0].Response == nil {
		t.Fatalf("List done = %v, want 3 with responses", keys(done))
	}
	limited, err := s.List(ctx, dedupe.ListFilter{Sender: sender, State: dedupe.StateProcessing, Limit: 1})
	if err != nil {
		t.Fatalf("List processing: %v", err)
	}
	if len(limited) != 1 || limited[0].Key != "evt4" {
		t.Fatalf("List processing limit 1 = %v, want [evt4]", keys(limited))
	}

	now := time.Now()
	for i, paths := range [][]string{nil, {"amount", "items.0.qty"}} {
		c := dedupe.Conflict{Sender: sender, Key: "evt0", StoredHash: "h", ReceivedHash: fmt.Sprintf("x%d", i),
			ReceivedAt: now.Add(time.Duration(i) * time.Second), ChangedPaths: paths, ExpiresAt: now.Add(time.Hour)}
		if err := s.RecordConflict(ctx, c); err != nil {
			t.Fatalf("RecordConflict: %v", err)
		}
	}
	cs, err := s.Conflicts(ctx, dedupe.ListFilter{Sender: sender})
	if err != nil {
		t.Fatalf("Conflicts: %v", err)
	}
	if len(cs) != 2 || cs[0].ReceivedHash != "x1" || cs[0].StoredHash != "h" || fmt.Sprint(cs[0].ChangedPaths) != "[amount items.0.qty]" || len(cs[1].ChangedPaths) != 0 {
		t.Fatalf("Conflicts = %+v", cs)
	}
	if cs[0].ReceivedAt.Sub(now.Add(time.Second)).Abs() > time.Second {
		t.Fatalf("conflict received_at = %v, want about %v", cs[0].ReceivedAt, now.Add(time.Second))
	}
	one, err := s.Conflicts(ctx, dedupe.ListFilter{Sender: sender, Limit: 1})
	if err != nil || len(one) != 1 {
		t.Fatalf("Conflicts limit 1 = %v, %v", one, err)
	}
	if rec := mustGet(t, s, sender, "evt0"); rec.PayloadHash != "h" || rec.State != dedupe.StateDone {
		t.Fatalf("recording a conflict touched the record: %+v", rec)
	}
}

func keys(rs []dedupe.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Key)
	}
	return out
}

func testForget(t *testing.T, s dedupe.Store, sender string) {
	o := owner()
	mustClaim(t, s, req(sender, "evt", "h1", o), dedupe.Claimed)
	if err := s.Forget(ctxT(t), sender, "evt"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	mustNotFound(t, s, sender, "evt")
	if err := s.Forget(ctxT(t), sender, "evt"); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("second Forget: err = %v, want ErrNotFound", err)
	}
	// The proxy that held the forgotten claim finishes: fenced.
	if err := s.Complete(ctxT(t), sender, "evt", o, sampleResponse(), att("complete")); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("Complete after Forget: err = %v, want ErrNotOwner", err)
	}
	mustNotFound(t, s, sender, "evt")
}

// Free releases a record in any state for the operator: it stays, released,
// with its hash, request and attempts (the operator's appended), and the
// next delivery claims it as new; a proxy still holding the freed claim is
// fenced out.
func testFreeKeepsHistory(t *testing.T, s dedupe.Store, sender string) {
	ctx := ctxT(t)
	if _, err := s.Free(ctx, sender, "none", att("released")); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("Free of no record: %v, want ErrNotFound", err)
	}
	body := []byte(`{"id":"evt"}`)
	head := &dedupe.StoredRequest{Method: "POST", URI: "/hooks/x", Header: http.Header{"X-A": {"1"}}}
	// held: unknown after an ambiguous outcome
	o := owner()
	r := req(sender, "held", "h1", o)
	r.RequestBody, r.Request = body, head
	mustClaim(t, s, r, dedupe.Claimed)
	held := att("ambiguous")
	if err := s.Hold(ctx, sender, "held", o, held); err != nil {
		t.Fatal(err)
	}
	// done, and processing under a live lease
	od := owner()
	mustClaim(t, s, req(sender, "done", "h1", od), dedupe.Claimed)
	if err := s.Complete(ctx, sender, "done", od, sampleResponse(), att("processed")); err != nil {
		t.Fatal(err)
	}
	op := owner()
	mustClaim(t, s, req(sender, "busy", "h1", op), dedupe.Claimed)

	for _, tt := range []struct {
		key  string
		was  dedupe.State
		hist int
	}{{"held", dedupe.StateUnknown, 1}, {"done", dedupe.StateDone, 1}, {"busy", dedupe.StateProcessing, 0}} {
		freed := att("released")
		freed.By = dedupe.AttemptByOperator
		was, err := s.Free(ctx, sender, tt.key, freed)
		if err != nil || was != tt.was {
			t.Fatalf("Free(%s) = %v, %v; want was %v", tt.key, was, err, tt.was)
		}
		rec := mustGet(t, s, sender, tt.key)
		if rec.State != dedupe.StateReleased || rec.Owner != "" || rec.PayloadHash != "h1" || rec.Response != nil ||
			len(rec.Attempts) != tt.hist+1 {
			t.Fatalf("freed %s = %+v, want released, no owner, hash h1, no answer, %d attempts", tt.key, rec, tt.hist+1)
		}
		sameAttempt(t, rec.Attempts[len(rec.Attempts)-1], freed)
	}
	rec := mustGet(t, s, sender, "held")
	sameAttempt(t, rec.Attempts[0], held)
	if string(rec.RequestBody) != string(body) || rec.Request == nil || rec.Request.URI != "/hooks/x" {
		t.Fatalf("freed record lost its request: %q %+v", rec.RequestBody, rec.Request)
	}
	// The proxy that held "busy" is fenced out.
	if err := s.Complete(ctx, sender, "busy", op, sampleResponse(), att("processed")); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("Complete by the freed owner: %v, want ErrNotOwner", err)
	}
	// The next delivery claims it as new, history kept.
	o2 := owner()
	res := mustClaim(t, s, req(sender, "held", "h1", o2), dedupe.Claimed)
	if res.Record.Owner != o2 {
		t.Fatalf("re-claim owner %q", res.Record.Owner)
	}
	if err := s.Complete(ctx, sender, "held", o2, sampleResponse(), att("processed")); err != nil {
		t.Fatal(err)
	}
	if rec := mustGet(t, s, sender, "held"); rec.State != dedupe.StateDone || len(rec.Attempts) != 3 {
		t.Fatalf("after the retry: %+v, want done with 3 attempts", rec)
	}
}

func testPurge(t *testing.T, s dedupe.Store, sender string) {
	ctx := ctxT(t)
	short := func(key string, lease time.Duration) string {
		o := owner()
		r := req(sender, key, "h", o)
		r.TTL = 200 * time.Millisecond
		r.Lease = lease
		mustClaim(t, s, r, dedupe.Claimed)
		return o
	}
	o := short("expired-done", 50*time.Millisecond)
	if err := s.Complete(ctx, sender, "expired-done", o, sampleResponse(), att("complete")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	short("expired-dead-claim", 50*time.Millisecond)
	short("expired-live-claim", time.Minute) // past ttl but its lease is alive
	mustClaim(t, s, req(sender, "fresh", "h", owner()), dedupe.Claimed)
	if err := s.RecordConflict(ctx, dedupe.Conflict{Sender: sender, Key: "expired-done", StoredHash: "h", ReceivedHash: "z",
		ReceivedAt: time.Now(), ExpiresAt: time.Now().Add(200 * time.Millisecond)}); err != nil {
		t.Fatalf("RecordConflict: %v", err)
	}
	time.Sleep(500 * time.Millisecond)

	n, err := s.Purge(ctx, dedupe.PurgeRequest{Limit: 1})
	if err != nil {
		t.Fatalf("Purge: %v", err)
	}
	if n != 1 {
		t.Fatalf("Purge limit 1 removed %d", n)
	}
	n, err = s.Purge(ctx, dedupe.PurgeRequest{})
	if err != nil {
		t.Fatalf("Purge: %v", err)
	}
	if n < 1 {
		t.Fatalf("second Purge removed %d, want at least the other expired record", n)
	}
	mustNotFound(t, s, sender, "expired-done")
	mustNotFound(t, s, sender, "expired-dead-claim")
	mustGet(t, s, sender, "expired-live-claim")
	mustGet(t, s, sender, "fresh")
	cs, err := s.Conflicts(ctx, dedupe.ListFilter{Sender: sender})
	if err != nil || len(cs) != 0 {
		t.Fatalf("conflicts after purge = %v, %v; want none", cs, err)
	}

	// --older-than: everything received before the cut, but never a live lease.
	o2 := owner()
	mustClaim(t, s, req(sender, "done-recent", "h", o2), dedupe.Claimed)
	if err := s.Complete(ctx, sender, "done-recent", o2, sampleResponse(), att("complete")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	time.Sleep(20 * time.Millisecond)
	cut := time.Now()
	time.Sleep(20 * time.Millisecond)
	mustClaim(t, s, req(sender, "after-cut", "h", owner()), dedupe.Claimed)
	if _, err := s.Purge(ctx, dedupe.PurgeRequest{ReceivedBefore: cut}); err != nil {
		t.Fatalf("Purge older-than: %v", err)
	}
	mustNotFound(t, s, sender, "done-recent")
	mustGet(t, s, sender, "fresh") // live lease
	mustGet(t, s, sender, "after-cut")

	// A run: one cursor, a call at a time until one comes back short, as
	// the retention loop purges. It removes every expired record nothing
	// holds, whatever the store does with the cursor.
	for i := range 3 {
		o := short(fmt.Sprintf("run-%d", i), 50*time.Millisecond)
		if err := s.Complete(ctx, sender, fmt.Sprintf("run-%d", i), o, sampleResponse(), att("complete")); err != nil {
			t.Fatalf("Complete: %v", err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	run := dedupe.PurgeRequest{Limit: 1, Cursor: new(dedupe.PurgeCursor)}
	for calls := 0; ; calls++ {
		n, err := s.Purge(ctx, run)
		if err != nil {
			t.Fatalf("Purge with a cursor: %v", err)
		}
		if n < run.Limit || calls > 10 {
			break
		}
	}
	for i := range 3 {
		mustNotFound(t, s, sender, fmt.Sprintf("run-%d", i))
	}
	mustGet(t, s, sender, "fresh")
}

func testRequestBodyKept(t *testing.T, s dedupe.Store, sender string) {
	r := req(sender, "evt", "h1", owner())
	r.RequestBody = []byte(`{"amount":100}`)
	mustClaim(t, s, r, dedupe.Claimed)
	res := mustClaim(t, s, req(sender, "evt", "h2", owner()), dedupe.Conflicting)
	if string(res.Record.RequestBody) != `{"amount":100}` {
		t.Fatalf("conflict result request body = %q", res.Record.RequestBody)
	}
	mustClaim(t, s, req(sender, "plain", "h1", owner()), dedupe.Claimed)
	if res := mustClaim(t, s, req(sender, "plain", "h2", owner()), dedupe.Conflicting); res.Record.RequestBody != nil {
		t.Fatalf("request body kept although not asked: %q", res.Record.RequestBody)
	}
}

func testTruncatedAndEmpty(t *testing.T, s dedupe.Store, sender string) {
	o := owner()
	mustClaim(t, s, req(sender, "trunc", "h", o), dedupe.Claimed)
	want := dedupe.Response{Status: 200, Header: http.Header{}, Body: bytes.Repeat([]byte("x"), 1000), Truncated: true}
	if err := s.Complete(ctxT(t), sender, "trunc", o, want, att("complete")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	sameResponse(t, mustGet(t, s, sender, "trunc").Response, want)

	o = owner()
	mustClaim(t, s, req(sender, "empty", "h", o), dedupe.Claimed)
	empty := dedupe.Response{Status: 204}
	if err := s.Complete(ctxT(t), sender, "empty", o, empty, att("complete")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	got := mustGet(t, s, sender, "empty").Response
	if got == nil || got.Status != 204 || len(got.Body) != 0 || len(got.Header) != 0 {
		t.Fatalf("empty response = %+v", got)
	}
}

func testCancelledContext(t *testing.T, s dedupe.Store, sender string) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Claim(ctx, req(sender, "evt", "h", owner()))
	if !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("Claim with a cancelled context: err = %v, want ErrUnavailable", err)
	}
	mustNotFound(t, s, sender, "evt")
}

func testProbeLeavesNothing(t *testing.T, s dedupe.Store, sender string) {
	o := owner()
	mustClaim(t, s, req(sender, "evt", "h1", o), dedupe.Claimed)
	for i := 0; i < 3; i++ {
		if err := s.Probe(ctxT(t)); err != nil {
			t.Fatalf("Probe on a healthy store: %v", err)
		}
	}
	// Probes running beside claims and completions of other keys.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := s.Probe(context.Background()); err != nil {
				t.Errorf("concurrent Probe: %v", err)
			}
		}()
		go func() {
			defer wg.Done()
			key, own := fmt.Sprintf("c%d", i), owner()
			if _, err := s.Claim(context.Background(), req(sender, key, "h", own)); err != nil {
				t.Errorf("Claim beside a probe: %v", err)
				return
			}
			if err := s.Complete(context.Background(), sender, key, own, sampleResponse(), att("complete")); err != nil {
				t.Errorf("Complete beside a probe: %v", err)
			}
		}()
	}
	wg.Wait()
	ctx := ctxT(t)
	if recs, err := s.List(ctx, dedupe.ListFilter{Sender: dedupe.ProbeSender}); err != nil || len(recs) != 0 {
		t.Fatalf("records of the probe sender: %v, %v", keys(recs), err)
	}
	all, err := s.List(ctx, dedupe.ListFilter{Limit: 10000})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, r := range all {
		if r.Sender == dedupe.ProbeSender {
			t.Fatalf("List shows a probe's record: %+v", r)
		}
	}
	if cs, err := s.Conflicts(ctx, dedupe.ListFilter{Sender: dedupe.ProbeSender}); err != nil || len(cs) != 0 {
		t.Fatalf("conflicts of the probe sender: %d, %v", len(cs), err)
	}
	if recs, err := s.List(ctx, dedupe.ListFilter{Sender: sender}); err != nil || len(recs) != 5 {
		t.Fatalf("the suite's records after probes: %v, %v; want evt and c0..c3", keys(recs), err)
	}
	if rec := mustGet(t, s, sender, "evt"); rec.State != dedupe.StateProcessing || rec.Owner != o {
		t.Fatalf("probes touched a claim: %+v", rec)
	}

	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Probe(cctx); !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("Probe with a cancelled context: err = %v, want ErrUnavailable", err)
	}
}

// claimAtOnce fires n claims of one key at the same moment and counts the
// outcomes; errors fail the test.
func claimAtOnce(t *testing.T, s dedupe.Store, sender string, n int) map[dedupe.Found]int {
	t.Helper()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex // guards counts
		counts = map[dedupe.Found]int{}
	)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := s.Claim(context.Background(), req(sender, "evt", "h1", owner()))
			if err != nil {
				t.Errorf("Claim: %v", err)
				return
			}
			mu.Lock()
			counts[res.Found]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return counts
}

func testParallelClaimOneWinner(t *testing.T, s dedupe.Store, sender string) {
	const n = 50
	got := claimAtOnce(t, s, sender, n)
	if got[dedupe.Claimed] != 1 || got[dedupe.InProgress] != n-1 || len(got) != 2 {
		t.Fatalf("%d claimers: %v, want 1 claimed and %d in_progress", n, got, n-1)
	}
}

func testParallelTakeoverOneWinner(t *testing.T, s dedupe.Store, sender string) {
	r := req(sender, "evt", "h1", owner())
	r.Lease = 100 * time.Millisecond
	mustClaim(t, s, r, dedupe.Claimed)
	time.Sleep(300 * time.Millisecond)
	const n = 50
	got := claimAtOnce(t, s, sender, n)
	if got[dedupe.TakenOver] != 1 || got[dedupe.InProgress] != n-1 || len(got) != 2 {
		t.Fatalf("%d takeover attempts: %v, want 1 taken_over and %d in_progress", n, got, n-1)
	}
	if rec := mustGet(t, s, sender, "evt"); rec.Takeovers != 1 {
		t.Fatalf("takeovers = %d, want 1", rec.Takeovers)
	}
}
