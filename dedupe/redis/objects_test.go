package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
)

func mustLockObject(t *testing.T, s dedupe.ObjectLocker, scope, object, owner string, lease time.Duration) {
	t.Helper()
	ok, err := s.LockObject(ctxT(t, 5*time.Second), scope, object, owner, lease)
	if err != nil || !ok {
		t.Fatalf("LockObject(%s/%s, %s) = %v, %v; want true", scope, object, owner, ok, err)
	}
}

// TestObjectKeys: one hash per object under an escaped scope, kept past its
// lease so that its holder can still free it.
func TestObjectKeys(t *testing.T) {
	srv := redistest.Shared(t)
	s := mustOpen(t, srv.URL())
	scope := fmt.Sprintf("keys-%d", time.Now().UnixNano())
	mustLockObject(t, s, scope+":a", "b:c", "o1", 200*time.Millisecond)
	key := "hookonce:obj:{" + scope + "%3Aa:b:c}"
	if got := srv.Do(t, "HGET", key, "o"); got != "$2" { // bulk reply header of "o1"
		t.Fatalf("HGET %s o = %q, want the owner", key, got)
	}
	pttl, _ := strconv.Atoi(strings.TrimPrefix(srv.Do(t, "PTTL", key), ":"))
	if pttl < int((5 * time.Minute).Milliseconds()) {
		t.Fatalf("PTTL %s = %d ms: the lock should outlive its lease", key, pttl)
	}
	time.Sleep(400 * time.Millisecond)
	if err := s.RenewObject(ctxT(t, 5*time.Second), scope+":a", "b:c", "o1", time.Minute); err != nil {
		t.Fatalf("renew after the lease ended, no one took it: %v", err)
	}
	time.Sleep(10 * time.Millisecond)
	ok, err := s.LockObject(ctxT(t, 5*time.Second), scope+":a", "b:c", "o2", time.Minute)
	if err != nil || ok {
		t.Fatalf("LockObject by another after the renew = %v, %v; want false", ok, err)
	}
	if err := s.UnlockObject(ctxT(t, 5*time.Second), scope+":a", "b:c", "o1"); err != nil {
		t.Fatalf("UnlockObject: %v", err)
	}
	if got := srv.Do(t, "EXISTS", key); got != ":0" {
		t.Fatalf("EXISTS %s after unlock = %s", key, got)
	}
	// An expired lease no one took: its holder frees it.
	mustLockObject(t, s, scope, "o", "o1", 100*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	if err := s.UnlockObject(ctxT(t, 5*time.Second), scope, "o", "o1"); err != nil {
		t.Fatalf("UnlockObject after the lease ended, no one took it: %v", err)
	}
}

// TestObjectWaitChange: WaitChange on dedupe.ObjectSender(scope) waits on
// the object lock, never on a record (there is none): a free object
// returns at once, a held one waits through the re-checks, an ended lease
// is seen by a re-check, an unlock is announced.
func TestObjectWaitChange(t *testing.T) {
	srv := redistest.Shared(t)
	s := mustOpen(t, srv.URL())
	scope := fmt.Sprintf("wait:%d", time.Now().UnixNano())
	sender := dedupe.ObjectSender(scope)

	t.Run("free returns at once", func(t *testing.T) {
		t0 := time.Now()
		if err := s.WaitChange(ctxT(t, 10*time.Second), sender, "free"); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d > 500*time.Millisecond {
			t.Fatalf("took %v", d)
		}
	})
	t.Run("held waits through re-checks until ctx ends", func(t *testing.T) {
		mustLockObject(t, s, scope, "held", "o", time.Minute)
		err := s.WaitChange(ctxT(t, 2500*time.Millisecond), sender, "held")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitChange = %v, want the deadline", err)
		}
		// A renewal or the holder locking again is no change.
		mustLockObject(t, s, scope, "held", "o", time.Minute)
	})
	t.Run("ended lease seen by a re-check", func(t *testing.T) {
		mustLockObject(t, s, scope, "lapse", "o", 500*time.Millisecond)
		t0 := time.Now()
		if err := s.WaitChange(ctxT(t, 10*time.Second), sender, "lapse"); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d > 3*time.Second {
			t.Fatalf("took %v", d)
		}
	})
	t.Run("unlock announced", func(t *testing.T) {
		mustLockObject(t, s, scope, "o:1", "o", time.Minute)
		other := mustOpen(t, srv.URL())
		done := make(chan error, 1)
		go func() { done <- other.WaitChange(ctxT(t, 30*time.Second), sender, "o:1") }()
		waitNumSub(t, srv, "hookonce:n:{hookonce%3Aobject%3A"+strings.ReplaceAll(scope, ":", "%3A")+":o:1}", ":1")
		time.Sleep(50 * time.Millisecond) // past the snapshot
		if err := s.UnlockObject(ctxT(t, 5*time.Second), scope, "o:1", "o"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("WaitChange: %v", err)
			}
		case <-time.After(900 * time.Millisecond):
			t.Fatal("the unlock woke no one")
		}
	})
}
