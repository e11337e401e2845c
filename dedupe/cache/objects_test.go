package cache_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/cache"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
)

// The object locks pass through the cache unchanged.
func TestObjectConformance(t *testing.T) {
	dedupetest.RunObjectConformance(t, func(t *testing.T) dedupe.Store {
		return cache.New(openSQLite(t), cache.Options{})
	})
}

// announcing is a store that is a Notifier and announces an unlock as a
// change of (ObjectSender(scope), object), as the ObjectLocker contract
// asks of Notifiers.
type announcing struct {
	dedupe.Store
	mu      sync.Mutex
	waiters map[[2]string][]chan struct{}
}

func (a *announcing) WaitChange(ctx context.Context, sender, key string) error {
	ch := make(chan struct{})
	a.mu.Lock()
	a.waiters[[2]string{sender, key}] = append(a.waiters[[2]string{sender, key}], ch)
	a.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *announcing) LockObject(ctx context.Context, scope, object, owner string, lease time.Duration) (bool, error) {
	return a.Store.(dedupe.ObjectLocker).LockObject(ctx, scope, object, owner, lease)
}

func (a *announcing) RenewObject(ctx context.Context, scope, object, owner string, lease time.Duration) error {
	return a.Store.(dedupe.ObjectLocker).RenewObject(ctx, scope, object, owner, lease)
}

func (a *announcing) UnlockObject(ctx context.Context, scope, object, owner string) error {
	err := a.Store.(dedupe.ObjectLocker).UnlockObject(ctx, scope, object, owner)
	if err == nil {
		k := [2]string{dedupe.ObjectSender(scope), object}
		a.mu.Lock()
		for _, ch := range a.waiters[k] {
			close(ch)
		}
		delete(a.waiters, k)
		a.mu.Unlock()
	}
	return err
}

// Over a Notifier the cache stays one, and a waiter on an object hears its
// unlock through it (the suite's NotifiedOnUnlock runs, not skipped).
func TestObjectConformanceNotifier(t *testing.T) {
	dedupetest.RunObjectConformance(t, func(t *testing.T) dedupe.Store {
		s := cache.New(&announcing{Store: openSQLite(t), waiters: map[[2]string][]chan struct{}{}}, cache.Options{})
		if _, ok := s.(dedupe.Notifier); !ok {
			t.Fatalf("cache over a Notifier is no Notifier: %T", s)
		}
		return s
	})
}

// plain hides the wrapped store's optional interfaces: a store with
// neither object locks nor a summary (as Redis keeps no summary).
type plain struct{ dedupe.Store }

// Over a store that holds no object locks, every call answers
// ErrUnavailable naming the missing capability.
func TestObjectLocksMissing(t *testing.T) {
	l, ok := cache.New(plain{openSQLite(t)}, cache.Options{}).(dedupe.ObjectLocker)
	if !ok {
		t.Fatal("the cache is no dedupe.ObjectLocker")
	}
	ctx := context.Background()
	_, lockErr := l.LockObject(ctx, "s", "o", "a", time.Minute)
	for name, err := range map[string]error{
		"LockObject":   lockErr,
		"RenewObject":  l.RenewObject(ctx, "s", "o", "a", time.Minute),
		"UnlockObject": l.UnlockObject(ctx, "s", "o", "a"),
	} {
		if !errors.Is(err, dedupe.ErrUnavailable) || !strings.Contains(err.Error(), "ObjectLocker") {
			t.Errorf("%s over a store without object locks: err = %v, want ErrUnavailable naming ObjectLocker", name, err)
		}
	}
}
