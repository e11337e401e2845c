package cache

import (
	"context"
	"fmt"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

var (
	_ dedupe.TrafficRecorder = (*Store)(nil)
	_ dedupe.TrafficReader   = (*Store)(nil)
)

// AddTraffic passes the counters to the wrapped store (they are never
// cached); a wrapped store that keeps none answers dedupe.ErrNoTraffic.
func (c *Store) AddTraffic(ctx context.Context, counts []dedupe.TrafficCount) error {
	if r, ok := c.Store.(dedupe.TrafficRecorder); ok {
		return r.AddTraffic(ctx, counts)
	}
	return fmt.Errorf("add traffic: the wrapped store %T: %w", c.Store, dedupe.ErrNoTraffic)
}

// Traffic reads the wrapped store's counters.
func (c *Store) Traffic(ctx context.Context, since time.Time) ([]dedupe.TrafficCount, error) {
	if r, ok := c.Store.(dedupe.TrafficReader); ok {
		return r.Traffic(ctx, since)
	}
	return nil, fmt.Errorf("traffic: the wrapped store %T: %w", c.Store, dedupe.ErrNoTraffic)
}

// TrafficTotals reads the wrapped store's counters summed over their days.
func (c *Store) TrafficTotals(ctx context.Context, since time.Time) ([]dedupe.TrafficTotal, error) {
	if r, ok := c.Store.(dedupe.TrafficReader); ok {
		return r.TrafficTotals(ctx, since)
	}
	return nil, fmt.Errorf("traffic totals: the wrapped store %T: %w", c.Store, dedupe.ErrNoTraffic)
}

// FingerprintKey passes the call on to the wrapped store (never cached
// here: the proxy reads it once).
func (c *Store) FingerprintKey(ctx context.Context) ([]byte, error) {
	if k, ok := c.Store.(dedupe.FingerprintKeyer); ok {
		return k.FingerprintKey(ctx)
	}
	return nil, fmt.Errorf("fingerprint key: the wrapped store %T: %w", c.Store, dedupe.ErrNotFound)
}
