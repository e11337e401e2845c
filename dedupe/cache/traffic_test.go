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

// The decorator passes the traffic counters on to the wrapped store.
func TestTrafficConformance(t *testing.T) {
	dedupetest.RunTrafficConformance(t, func(t *testing.T) dedupe.Store {
		return cache.New(openSQLite(t), cache.Options{})
	}, nil)
}

func TestTrafficOfAStoreWithout(t *testing.T) {
	c := cache.New(plain{openSQLite(t)}, cache.Options{})
	if _, err := c.(dedupe.TrafficReader).Traffic(context.Background(), time.Time{}); !errors.Is(err, dedupe.ErrNoTraffic) {
		t.Fatalf("Traffic of a store without: %v, want ErrNoTraffic", err)
	}
	if err := c.(dedupe.TrafficRecorder).AddTraffic(context.Background(), nil); !errors.Is(err, dedupe.ErrNoTraffic) {
		t.Fatalf("AddTraffic of a store without: %v, want ErrNoTraffic", err)
	}
}
