package dedupetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// RunObjectConformance runs every guarantee of dedupe.ObjectLocker against
// newStore's backend, which must implement it.
func RunObjectConformance(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s dedupe.ObjectLocker, scope string)
	}{
		{"LockUnlock", testObjectLockUnlock},
		{"OneHolder", testObjectOneHolder},
		{"LeaseExpiry", testObjectLeaseExpiry},
		{"Fencing", testObjectFencing},
		{"RenewKeeps", testObjectRenewKeeps},
		{"ScopesAndObjectsApart", testObjectScopesApart},
		{"ParallelOneHolder", testObjectParallelOneHolder},
		{"NotifiedOnUnlock", testObjectNotified},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			l, ok := s.(dedupe.ObjectLocker)
			if !ok {
				t.Fatalf("%T does not implement dedupe.ObjectLocker", s)
			}
			tt.fn(t, l, fmt.Sprintf("scope%d-%d", i, time.Now().UnixNano()))
		})
	}
}

func mustLock(t *testing.T, s dedupe.ObjectLocker, scope, object, own string, lease time.Duration, want bool) {
	t.Helper()
	got, err := s.LockObject(ctxT(t), scope, object, own, lease)
	if err != nil {
		t.Fatalf("LockObject(%s/%s, %s): %v", scope, object, own, err)
	}
	if got != want {
		t.Fatalf("LockObject(%s/%s, %s) = %v, want %v", scope, object, own, got, want)
	}
}

func testObjectLockUnlock(t *testing.T, s dedupe.ObjectLocker, scope string) {
	a, b := owner(), owner()
	mustLock(t, s, scope, "order-1", a, longLease, true)
	mustLock(t, s, scope, "order-1", a, longLease, true) // the holder again: still its
	mustLock(t, s, scope, "order-1", b, longLease, false)
	if err := s.UnlockObject(ctxT(t), scope, "order-1", a); err != nil {
		t.Fatalf("UnlockObject by the holder: %v", err)
	}
	mustLock(t, s, scope, "order-1", b, longLease, true)
	if err := s.UnlockObject(ctxT(t), scope, "order-1", b); err != nil {
		t.Fatal(err)
	}
	if err := s.UnlockObject(ctxT(t), scope, "order-1", b); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("unlocking a free object: err = %v, want ErrNotOwner", err)
	}
}

func testObjectOneHolder(t *testing.T, s dedupe.ObjectLocker, scope string) {
	a, b := owner(), owner()
	mustLock(t, s, scope, "o", a, longLease, true)
	if err := s.UnlockObject(ctxT(t), scope, "o", b); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("a non-holder's unlock: err = %v, want ErrNotOwner", err)
	}
	if err := s.RenewObject(ctxT(t), scope, "o", b, longLease); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("a non-holder's renew: err = %v, want ErrNotOwner", err)
	}
	mustLock(t, s, scope, "o", b, longLease, false) // still a's
}

func testObjectLeaseExpiry(t *testing.T, s dedupe.ObjectLocker, scope string) {
	dead, next := owner(), owner()
	mustLock(t, s, scope, "o", dead, 150*time.Millisecond, true)
	mustLock(t, s, scope, "o", next, longLease, false)
	time.Sleep(400 * time.Millisecond)
	mustLock(t, s, scope, "o", next, longLease, true) // the dead holder's lease ran out
}

func testObjectFencing(t *testing.T, s dedupe.ObjectLocker, scope string) {
	stale, fresh := owner(), owner()
	mustLock(t, s, scope, "o", stale, 150*time.Millisecond, true)
	time.Sleep(400 * time.Millisecond)
	mustLock(t, s, scope, "o", fresh, longLease, true)
	// The stale holder wakes up: it can neither renew nor free the
	// object another holds now.
	if err := s.RenewObject(ctxT(t), scope, "o", stale, longLease); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("stale renew: err = %v, want ErrNotOwner", err)
	}
	if err := s.UnlockObject(ctxT(t), scope, "o", stale); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("stale unlock: err = %v, want ErrNotOwner", err)
	}
	mustLock(t, s, scope, "o", owner(), longLease, false) // still fresh's
	if err := s.UnlockObject(ctxT(t), scope, "o", fresh); err != nil {
		t.Fatal(err)
	}
}

func testObjectRenewKeeps(t *testing.T, s dedupe.ObjectLocker, scope string) {
	o := owner()
	mustLock(t, s, scope, "o", o, 300*time.Millisecond, true)
	for range 5 {
		time.Sleep(100 * time.Millisecond)
		if err := s.RenewObject(ctxT(t), scope, "o", o, 300*time.Millisecond); err != nil {
			t.Fatalf("renew: %v", err)
		}
	}
	mustLock(t, s, scope, "o", owner(), longLease, false) // 500 ms on, renewed: still held
	// An expired lease no one took since: the holder may still free it.
	time.Sleep(400 * time.Millisecond)
	if err := s.UnlockObject(ctxT(t), scope, "o", o); err != nil && !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("unlock after expiry: %v", err)
	}
	mustLock(t, s, scope, "o", owner(), longLease, true)
}

func testObjectScopesApart(t *testing.T, s dedupe.ObjectLocker, scope string) {
	a := owner()
	mustLock(t, s, scope, "o:1", a, longLease, true)
	mustLock(t, s, scope, "o", owner(), longLease, true)       // another object
	mustLock(t, s, scope+"x", "o:1", owner(), longLease, true) // another scope
	mustLock(t, s, scope+":o", "1", owner(), longLease, true)  // no join collides
	mustLock(t, s, scope, "o:1", owner(), longLease, false)
}

func testObjectParallelOneHolder(t *testing.T, s dedupe.ObjectLocker, scope string) {
	const n = 32
	var won atomic.Int32
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.LockObject(ctxT(t), scope, "hot", owner(), longLease)
			if err != nil {
				t.Errorf("LockObject: %v", err)
			}
			if ok {
				won.Add(1)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d of %d concurrent lockers hold the object, want 1", won.Load(), n)
	}
}

// testObjectNotified: a store that is a Notifier wakes a waiter on the
// object when its holder frees it, long before any re-check would.
func testObjectNotified(t *testing.T, s dedupe.ObjectLocker, scope string) {
	n, ok := s.(dedupe.Notifier)
	if !ok {
		t.Skipf("%T announces no changes: waiters poll", s)
	}
	o := owner()
	mustLock(t, s, scope, "o", o, longLease, true)
	woke := make(chan time.Duration, 1)
	ctx := ctxT(t)
	started := make(chan struct{})
	go func() {
		close(started)
		t0 := time.Now()
		_ = n.WaitChange(ctx, dedupe.ObjectSender(scope), "o")
		woke <- time.Since(t0)
	}()
	<-started
	time.Sleep(300 * time.Millisecond) // the waiter is subscribed
	if err := s.UnlockObject(ctxT(t), scope, "o", o); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-woke:
		// Freed 300 ms in; a re-check alone would come later than this.
		if d > 900*time.Millisecond {
			t.Fatalf("the waiter woke %v after the wait began: by a re-check, not by the unlock", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken when the object was freed")
	}
}
