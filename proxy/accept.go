package proxy

import (
	"context"
	"fmt"

	"github.com/hookonce/hookonce/dedupe"
)

// Acceptance is what an operator's acceptance of a conflict came to: the
// conflict as marked, and the delivery of its payload to the site.
type Acceptance struct {
	Conflict dedupe.Conflict
	Redelivery
}

// Accept forwards the refused payload of a conflict of (sender, key) to
// the site as an event of its own, once: id names the conflict
// (dedupe.Conflict.ID), "" the newest of the key. The store marks the
// conflict accepted first, atomically (Store.AcceptConflict: a second
// accept, from this process or another, is refused with
// dedupe.ErrAccepted); then the kept request runs through the normal claim
// path, as a redelivery does, under the key KEY:accepted-ID
// (dedupe.AcceptedKey), so the site gets the Idempotency-Key
// SENDER:KEY:accepted-ID and the copy is a record of its own: claimed
// once, answered, replayed, and, if the site fails, released for
// `hookonce redeliver SENDER KEY:accepted-ID`. The original record is
// never touched. A conflict whose payload was not kept whole, or that was
// recorded in shadow mode (the site got that payload already), is refused
// with dedupe.ErrNotAcceptable.
func (p *Proxy) Accept(ctx context.Context, sender, key, id, by string) (Acceptance, error) {
	c := p.contract.Load()
	s := c.Sender(sender)
	if s == nil {
		return Acceptance{}, fmt.Errorf("accept %s/%s: %w", sender, key, ErrNoSender)
	}
	conf, err := p.store.AcceptConflict(ctx, sender, key, id, by)
	if err != nil {
		return Acceptance{Conflict: conf}, fmt.Errorf("accept %s/%s: %w", sender, key, err)
	}
	p.log.Warn("operator accepted a conflict: its payload goes to the site as an event of its own",
		"sender", sender, "key", key, "conflict", conf.ID, "accepted_key", conf.AcceptedKey(), "by", by,
		"stored_sha256", conf.StoredHash, "received_sha256", conf.ReceivedHash)
	res, err := p.deliverKept(ctx, c, s, conf.AcceptedKey(), conf.Request, conf.Body)
	if err != nil {
		return Acceptance{Conflict: conf}, fmt.Errorf("accept %s/%s: %w", sender, key, err)
	}
	p.log.Warn("accepted conflict delivered", "sender", sender, "key", conf.AcceptedKey(), "outcome", res.Outcome, "status", res.Status)
	return Acceptance{Conflict: conf, Redelivery: res}, nil
}
