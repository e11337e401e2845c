package cache

import (
	"context"
	"fmt"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

var _ dedupe.Deferrer = (*Store)(nil)

// A durable delivery's record is done from Defer on (its answer is the
// acknowledgement), so repeats of it are answered from memory like any
// done record. A settle may change it (the site's own answer, released on
// giving up, unknown on a hold): it evicts first, as Release does.

func (c *Store) deferrer(op string) (dedupe.Deferrer, error) {
	if d, ok := c.Store.(dedupe.Deferrer); ok {
		return d, nil
	}
	return nil, fmt.Errorf("%s: the wrapped store %T keeps no durable deliveries (dedupe.Deferrer): %w", op, c.Store, dedupe.ErrUnavailable)
}

// Defer passes the call to the wrapped store.
func (c *Store) Defer(ctx context.Context, sender, key, owner string, d dedupe.DeferRequest) error {
	w, err := c.deferrer("defer")
	if err != nil {
		return err
	}
	return w.Defer(ctx, sender, key, owner, d)
}

// TakeDue passes the call to the wrapped store.
func (c *Store) TakeDue(ctx context.Context, sender, owner string, lease time.Duration, n int) ([]dedupe.Record, error) {
	w, err := c.deferrer("take due")
	if err != nil {
		return nil, err
	}
	return w.TakeDue(ctx, sender, owner, lease, n)
}

// RenewPending passes the call to the wrapped store.
func (c *Store) RenewPending(ctx context.Context, sender, key, owner string, lease time.Duration) error {
	w, err := c.deferrer("renew pending")
	if err != nil {
		return err
	}
	return w.RenewPending(ctx, sender, key, owner, lease)
}

// SettlePending evicts the record, then passes the call on.
func (c *Store) SettlePending(ctx context.Context, sender, key, owner string, st dedupe.PendingSettle) error {
	w, err := c.deferrer("settle pending")
	if err != nil {
		return err
	}
	c.evict(sender, key)
	return w.SettlePending(ctx, sender, key, owner, st)
}

// PendingCounts passes the call to the wrapped store (never cached).
func (c *Store) PendingCounts(ctx context.Context) ([]dedupe.PendingCount, error) {
	w, err := c.deferrer("pending counts")
	if err != nil {
		return nil, err
	}
	return w.PendingCounts(ctx)
}
