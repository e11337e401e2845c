package cache_test

import (
	"testing"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/cache"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
)

// Durable deliveries pass through the cache, and a settle that changes a
// done record is never answered from memory afterwards.
func TestPendingConformance(t *testing.T) {
	dedupetest.RunPendingConformance(t, func(t *testing.T) dedupe.Store {
		return cache.New(openSQLite(t), cache.Options{})
	})
}
