package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

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
// with dedupe.ErrNotAcceptable. An accept interrupted between the mark and
// the forward (serve stopped) is taken up again by the next accept once
// AcceptResumeAfter has passed and the copy has no record.
func (p *Proxy) Accept(ctx context.Context, sender, key, id, by string) (Acceptance, error) {
	c := p.contract.Load()
	s := c.Sender(sender)
	if s == nil {
		return Acceptance{}, fmt.Errorf("accept %s/%s: %w", sender, key, ErrNoSender)
	}
	conf, err := p.store.AcceptConflict(ctx, sender, key, id, by)
	if err != nil {
		if !p.interruptedAccept(ctx, conf, err) {
			return Acceptance{Conflict: conf}, fmt.Errorf("accept %s/%s: %w", sender, key, err)
		}
		p.log.Warn("operator accept resumed: the conflict was marked accepted but its payload never reached the site",
			"sender", sender, "key", key, "conflict", conf.ID, "accepted_key", conf.AcceptedKey(), "by", by,
			"accepted_at", conf.AcceptedAt.UTC().Format(time.RFC3339), "accepted_by", conf.AcceptedBy)
	} else {
		p.log.Warn("operator accepted a conflict: its payload goes to the site as an event of its own",
			"sender", sender, "key", key, "conflict", conf.ID, "accepted_key", conf.AcceptedKey(), "by", by,
			"stored_sha256", conf.StoredHash, "received_sha256", conf.ReceivedHash)
	}
	res, err := p.deliverKept(ctx, c, s, conf.AcceptedKey(), conf.Request, conf.Body)
	if err != nil {
		return Acceptance{Conflict: conf}, fmt.Errorf("accept %s/%s: %w", sender, key, err)
	}
	p.log.Warn("accepted conflict delivered", "sender", sender, "key", conf.AcceptedKey(), "outcome", res.Outcome, "status", res.Status)
	return Acceptance{Conflict: conf, Redelivery: res}, nil
}

// AcceptResumeAfter is how long after a conflict was marked accepted an
// accept may take it up again when its copy never reached the store (the
// serve that marked it stopped before it forwarded). It is longer than
// any accept runs (the admin API gives one 2 minutes), so a copy still on
// its way is never sent beside it; and even then the claim on the copy's
// key lets the site run it once.
var AcceptResumeAfter = 5 * time.Minute

// interruptedAccept reports whether err refuses an accept only because
// conf was marked accepted by an accept that never forwarded it: marked
// longer than AcceptResumeAfter ago, and no record of its copy.
func (p *Proxy) interruptedAccept(ctx context.Context, conf dedupe.Conflict, err error) bool {
	if !errors.Is(err, dedupe.ErrAccepted) || !conf.Kept() || conf.Shadow || time.Since(conf.AcceptedAt) < AcceptResumeAfter {
		return false
	}
	_, gerr := p.store.Get(ctx, conf.Sender, conf.AcceptedKey())
	return errors.Is(gerr, dedupe.ErrNotFound)
}
