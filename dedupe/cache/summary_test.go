package cache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/cache"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
)

// The decorator passes Summary on to the wrapped store.
func TestSummaryConformance(t *testing.T) {
	dedupetest.RunSummaryConformance(t, func(t *testing.T) dedupe.Store {
		return cache.New(openSQLite(t), cache.Options{})
	})
}

func TestSummaryOfAStoreWithout(t *testing.T) {
	c := cache.New(plain{openSQLite(t)}, cache.Options{})
	_, err := c.(dedupe.Summarizer).Summary(context.Background(), time.Time{})
	if !errors.Is(err, dedupe.ErrNoSummary) {
		t.Fatalf("Summary of a store without: %v, want ErrNoSummary", err)
	}
}
