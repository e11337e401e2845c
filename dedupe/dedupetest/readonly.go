package dedupetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// OpenReadOnly opens a read-only handle (a backend's OpenReadOnly) on the
// store that the suite's writable store writes to.
type OpenReadOnly func(t *testing.T) dedupe.Store

// RunReadOnly checks a backend's OpenReadOnly against its writable store
// rw: the read-only handle reads what rw wrote, including what rw writes
// after the handle was opened; every write fails with dedupe.ErrReadOnly
// and changes nothing.
func RunReadOnly(t *testing.T, rw dedupe.Store, openRO OpenReadOnly) {
	sender := fmt.Sprintf("ro-%d", time.Now().UnixNano())
	ctx := ctxT(t)
	done, busy := owner(), owner()
	mustClaim(t, rw, req(sender, "done", "h1", done), dedupe.Claimed)
	if err := rw.Complete(ctx, sender, "done", done, sampleResponse(), att("complete")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	time.Sleep(5 * time.Millisecond) // distinct received times, for List's order
	mustClaim(t, rw, req(sender, "busy", "h2", busy), dedupe.Claimed)
	if err := rw.RecordConflict(ctx, keptConflict(sender, "done", "h9", []byte(`{"amount":9}`))); err != nil {
		t.Fatalf("RecordConflict: %v", err)
	}

	ro := openRO(t)
	t.Cleanup(func() { ro.Close() })

	t.Run("reads what was written", func(t *testing.T) {
		if err := ro.Ping(ctxT(t)); err != nil {
			t.Fatalf("Ping: %v", err)
		}
		rec := mustGet(t, ro, sender, "done")
		sameResponse(t, rec.Response, sampleResponse())
		mustNotFound(t, ro, sender, "nope")
		recs, err := ro.List(ctxT(t), dedupe.ListFilter{Sender: sender})
		if err != nil || len(recs) != 2 || recs[0].Key != "busy" || recs[1].Key != "done" {
			t.Fatalf("List = %v, %v; want [busy done]", keys(recs), err)
		}
		cs, err := ro.Conflicts(ctxT(t), dedupe.ListFilter{Sender: sender})
		if err != nil || len(cs) != 1 || cs[0].ReceivedHash != "h9" || string(cs[0].Body) != `{"amount":9}` || cs[0].Accepted() {
			t.Fatalf("Conflicts = %+v, %v", cs, err)
		}
		part, err := ro.List(ctxT(t), dedupe.ListFilter{KeyPart: "busy", Sender: sender})
		if err != nil || len(part) != 1 {
			t.Fatalf("List by key part = %v, %v", keys(part), err)
		}
	})

	t.Run("reads the fingerprint key, makes none", func(t *testing.T) {
		rok, ok := ro.(dedupe.FingerprintKeyer)
		if !ok {
			t.Fatalf("%T keeps no fingerprint key", ro)
		}
		if k, err := rok.FingerprintKey(ctxT(t)); err != nil && !errors.Is(err, dedupe.ErrNotFound) {
			t.Fatalf("FingerprintKey before one was made = %x, %v", k, err)
		}
		want, err := rw.(dedupe.FingerprintKeyer).FingerprintKey(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := rok.FingerprintKey(ctxT(t)); err != nil || string(got) != string(want) {
			t.Fatalf("read-only FingerprintKey = %x, %v; want the key the store made, %x", got, err, want)
		}
	})

	t.Run("sees later writes", func(t *testing.T) {
		if err := rw.Complete(ctxT(t), sender, "busy", busy, dedupe.Response{Status: 202, Body: []byte("later")}, att("complete")); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if rec := mustGet(t, ro, sender, "busy"); rec.State != dedupe.StateDone || string(rec.Response.Body) != "later" {
			t.Fatalf("read-only handle shows %+v after the completion", rec)
		}
	})

	t.Run("writes are refused", func(t *testing.T) {
		ctx := ctxT(t)
		_, claimErr := ro.Claim(ctx, req(sender, "new", "h", owner()))
		_, purgeErr := ro.Purge(ctx, dedupe.PurgeRequest{ReceivedBefore: time.Now().Add(time.Hour)})
		_, freeErr := ro.Free(ctx, sender, "done", att("released"))
		_, acceptErr := ro.AcceptConflict(ctx, sender, "done", "", "op")
		l, ok := ro.(dedupe.ObjectLocker)
		if !ok {
			t.Fatalf("the read-only store %T is no dedupe.ObjectLocker", ro)
		}
		_, lockErr := l.LockObject(ctx, sender, "o", owner(), time.Minute)
		errs := map[string]error{
			"Claim":          claimErr,
			"Complete":       ro.Complete(ctx, sender, "done", done, dedupe.Response{Status: 500}, att("complete")),
			"Release":        ro.Release(ctx, sender, "busy", busy, att("release")),
			"Hold":           ro.Hold(ctx, sender, "busy", busy, att("hold")),
			"Renew":          ro.Renew(ctx, sender, "busy", busy, time.Hour),
			"RecordConflict": ro.RecordConflict(ctx, dedupe.Conflict{Sender: sender, Key: "done", StoredHash: "h1", ReceivedHash: "x"}),
			"AddHits":        ro.AddHits(ctx, []dedupe.Hit{{Sender: sender, Key: "done", N: 5}}),
			"Forget":         ro.Forget(ctx, sender, "done"),
			"Free":           freeErr,
			"AcceptConflict": acceptErr,
			"Purge":          purgeErr,
			"Probe":          ro.Probe(ctx),
			"LockObject":     lockErr,
			"RenewObject":    l.RenewObject(ctx, sender, "o", owner(), time.Minute),
			"UnlockObject":   l.UnlockObject(ctx, sender, "o", owner()),
		}
		for name, err := range errs {
			if !errors.Is(err, dedupe.ErrReadOnly) {
				t.Errorf("%s on a read-only store: err = %v, want ErrReadOnly", name, err)
			}
		}
		mustNotFound(t, rw, sender, "new")
		if rec := mustGet(t, rw, sender, "done"); rec.Hits != 0 || rec.Response.Status != 201 {
			t.Fatalf("a refused write changed the record: %+v", rec)
		}
		if recs, err := rw.List(ctx, dedupe.ListFilter{Sender: sender}); err != nil || len(recs) != 2 {
			t.Fatalf("List after refused writes = %v, %v", keys(recs), err)
		}
		if cs, err := rw.Conflicts(ctx, dedupe.ListFilter{Sender: sender}); err != nil || len(cs) != 1 || cs[0].Accepted() {
			t.Fatalf("Conflicts after refused writes = %d, %v", len(cs), err)
		}
	})

	t.Run("CloseTwice", func(t *testing.T) {
		s := openRO(t)
		if err := s.Close(); err != nil {
			t.Fatalf("first Close: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}
