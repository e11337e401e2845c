package cache_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/cache"
)

type confirming struct {
	dedupe.Store
	calls int
}

func (c *confirming) GetConfirmed(ctx context.Context, sender, key string) (dedupe.Record, error) {
	c.calls++
	return c.Store.Get(ctx, sender, key)
}

// The cache passes GetConfirmed on to the store it wraps (never answers it
// from memory), and falls back to the store's Get when it has none.
func TestGetConfirmedPassesThrough(t *testing.T) {
	inner := &confirming{Store: openSQLite(t)}
	c, ok := cache.New(inner, cache.Options{}).(dedupe.ConfirmedReader)
	if !ok {
		t.Fatal("the cache is not a dedupe.ConfirmedReader")
	}
	if _, err := c.GetConfirmed(context.Background(), "s", "k"); !errors.Is(err, dedupe.ErrNotFound) || inner.calls != 1 {
		t.Fatalf("GetConfirmed: %v, %d calls to the store's", err, inner.calls)
	}
	plain := cache.New(openSQLite(t), cache.Options{}).(dedupe.ConfirmedReader)
	if _, err := plain.GetConfirmed(context.Background(), "s", "k"); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("GetConfirmed over a store without it: %v", err)
	}
}
