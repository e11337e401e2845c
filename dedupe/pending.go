package dedupe

import (
	"context"
	"time"
)

// Durable acceptance (a sender's `ack: durable`): hookonce answers the
// sender itself once the delivery is stored, and owes the site that
// delivery until the site has done it. The record of such an event is
// done from the moment the sender was answered (its Response is the
// answer the sender got, replayed to exact repeats; a changed payload is a
// conflict as for any done record), and carries a Pending: the delivery
// still owed, with a lease of its own, so that exactly one deliverer (of
// any replica sharing the store) sends it to the site at a time.

// Pending is a durable delivery still owed to the site. The request it
// sends is the record's kept Request and RequestBody.
type Pending struct {
	Since  time.Time // when the sender was answered (Defer)
	NextAt time.Time // when the next try is due
	Until  time.Time // when hookonce stops trying (the sender's retry_for)
	Tries  int       // tries that ended with a retry (SettleRetry)
	// Owner is the deliverer holding the delivery now, with its lease;
	// "" (and LeaseUntil zero) between tries.
	Owner      string
	LeaseUntil time.Time
}

// DeferRequest turns a processing claim into a durable delivery.
type DeferRequest struct {
	// Ack is what the sender was (or is about to be) answered: stored as
	// the record's Response and replayed to exact repeats.
	Ack Response
	// RetryFor: Pending.Until is the store's now + RetryFor.
	RetryFor time.Duration
	// Lease, when > 0: the owner goes on holding the delivery under
	// Pending.Owner for Lease (its first try is under way); when 0 the
	// delivery is due at once for any deliverer.
	Lease time.Duration
}

// PendingOutcome says how a try of a pending delivery ended.
type PendingOutcome int

const (
	// SettleDelivered: the site did it. Pending is cleared; the record
	// stays done (its Response replaced by PendingSettle.Response when
	// that is set: the site's own answer, when that is what the sender
	// got).
	SettleDelivered PendingOutcome = iota + 1
	// SettleRetry: try again later. The lease is given up, NextAt is the
	// store's now + RetryIn, Tries grows by one.
	SettleRetry
	// SettleGiveUp: hookonce stops trying (retry_for ran out, or the site
	// refuses the delivery for good). The record becomes released (its
	// Response dropped, its kept request and attempts kept), an unretried
	// event an operator redelivers; Pending is cleared.
	SettleGiveUp
	// SettleHold: the try's outcome is ambiguous and the sender holds such
	// events (ambiguous: hold). The record becomes unknown (its Response
	// dropped, as Hold leaves a claim; request and attempts kept);
	// Pending is cleared.
	SettleHold
)

// PendingSettle is what a deliverer stores when a try ends.
type PendingSettle struct {
	Outcome  PendingOutcome
	Attempt  Attempt   // appended to the record's attempts
	Response *Response // SettleDelivered only: replaces the stored answer when non-nil
	RetryIn  time.Duration
}

// PendingCount is one sender's owed deliveries.
type PendingCount struct {
	Sender string
	N      int64
	Oldest time.Time // the Since of its oldest
}

// Deferrer is implemented by stores that keep durable deliveries (every
// backend; dedupetest.RunPendingConformance checks it). It is an interface
// of its own so that a Store decorator passes it on explicitly.
//
// Besides its methods, a store keeping Pending deliveries guarantees:
// Get and List return a record's Pending (nil when none owed); List with
// ListFilter.Pending returns only records with one; Free clears Pending
// (the record is released like any other); Forget removes it with the
// record; Purge never removes a record that has one, whatever its
// ExpiresAt; Defer extends ExpiresAt to at least Pending.Until; and a
// Claim that takes an expired record as new leaves it without Pending.
type Deferrer interface {
	// Defer: if owner holds the processing claim on (sender, key), the
	// record becomes done with d.Ack as its Response, owner and lease
	// cleared, and gets a Pending (Since and NextAt now, Until now +
	// RetryFor, Tries 0, held by owner for d.Lease when that is > 0).
	// Otherwise ErrNotOwner and nothing is written.
	Defer(ctx context.Context, sender, key, owner string, d DeferRequest) error

	// TakeDue leases to owner, for lease, up to n pending deliveries of
	// sender that are due (NextAt not after the store's now) and not
	// held (no Owner, or its LeaseUntil passed), oldest NextAt first, and
	// returns their records as they stand after the take (Request,
	// RequestBody and Pending included). Under any number of concurrent
	// callers, from any number of processes, a delivery is taken by one.
	TakeDue(ctx context.Context, sender, owner string, lease time.Duration, n int) ([]Record, error)

	// RenewPending extends owner's lease on the pending delivery of
	// (sender, key) to lease from now; ErrNotOwner when owner no longer
	// holds it (settled, freed, or taken by another after its lease).
	RenewPending(ctx context.Context, sender, key, owner string, lease time.Duration) error

	// SettlePending stores how owner's try ended (PendingSettle), if owner
	// still holds the pending delivery of (sender, key); otherwise
	// ErrNotOwner and nothing is written.
	SettlePending(ctx context.Context, sender, key, owner string, st PendingSettle) error

	// PendingCounts returns, for each sender with pending deliveries, how
	// many and the Since of the oldest.
	PendingCounts(ctx context.Context) ([]PendingCount, error)
}
