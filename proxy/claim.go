package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
)

// claimLoop runs rows 4 to 9 of the decision table (decideClaim judges,
// this acts); a delivery waiting on another one comes back here when that
// one finishes.
func (d *delivery) claimLoop() {
	s, w := d.s, d.w
	if d.backlogFull() {
		return
	}
	start := time.Now()
	deadline := start.Add(s.WaitTimeout)
	rekeyed := false  // changed_payload: new_event extends the key once
	accepted := false // moved to an accepted copy's key once
	for {
		res, err := d.claim(start)
		start = time.Time{} // a claim again reads the clock again
		if err != nil {
			d.storeDown(err)
			return
		}
		if res.Found == dedupe.Conflicting && d.legacyHash != "" && res.Record.PayloadHash == d.legacyHash {
			// Stored by a hookonce whose hash did not cover the query:
			// the same payload in the old form. Claim in that form.
			d.hash, d.legacyHash = d.legacyHash, ""
			continue
		}
		// Row 7: what a changed payload means for this sender.
		var attrs []any
		answeredDup := false
		if res.Found == dedupe.Conflicting {
			attrs = []any{"stored_sha256", res.Record.PayloadHash, "received_sha256", d.hash}
			if !accepted && !rekeyed && s.ChangedPayload != contract.ChangedNewEvent && !s.Shadow() {
				// An operator accepted this payload already: it is the
				// accepted copy's event, answered from its record (or, if
				// the copy never ran, claimed there): never a new conflict.
				c, ok, err := d.acceptedCopy()
				if err != nil {
					// Unreadable is not "not accepted": ask for a retry.
					// Never forwarded, whatever on_store_error says: the
					// payload is a changed one.
					d.done(OutcomeStoreError, http.StatusServiceUnavailable, append(attrs, "err", err.Error())...)
					answerStoreDown(w)
					return
				}
				if ok {
					accepted = true
					d.key = c.AcceptedKey()
					d.log.Info("changed payload accepted by an operator: answered as its accepted copy",
						append(attrs, "key", d.key, "conflict", c.ID, "accepted_by", c.AcceptedBy)...)
					continue
				}
			}
			changed := judgeChanged(s, res)
			if changed.rekey && !rekeyed {
				rekeyed = true
				d.key = contract.ChangedKey(d.key, d.hash)
				d.log.Info("changed payload under a known id: claimed as its own event",
					append(attrs, "key", d.key, "changed_payload", s.ChangedPayload)...)
				continue
			}
			if changed.res.Found != res.Found {
				attrs = append(attrs, "changed_payload", s.ChangedPayload)
				answeredDup = true
			}
			res = changed.res
		}
		// Only a delivery in progress elsewhere may wait (decideClaim).
		canWait := res.Found == dedupe.InProgress && time.Now().Before(deadline)
		dec := decideClaim(s, res, canWait)
		switch res.Found {
		case dedupe.Held:
			attrs = []any{"state", "unknown"}
		}
		if dec.record {
			d.recordConflict(res.Record, false)
		}
		if answeredDup && (dec.act == actReplay || dec.act == actPlain) {
			// Answered from another payload's stored answer: nothing is
			// swallowed without a trace. Recorded like a conflict (what
			// differed), marked as answered, so the operator can accept it.
			d.recordConflict(res.Record, true)
		}
		switch dec.act {
		case actForward:
			d.takeover = res.Found == dedupe.TakenOver
			if s.Durable() && d.by == dedupe.AttemptBySender && d.p.durable.store != nil {
				d.forwardDurable()
				return
			}
			d.forwardClaimed()
		case actPlain:
			d.done(dec.outcome, 0, attrs...)
			d.forwardPlain()
		case actReplay:
			d.p.hits.add(s.Name, d.key)
			d.done(dec.outcome, dec.status, attrs...)
			replay(w, s, res.Record.Response)
		case actConflict:
			d.done(dec.outcome, dec.status, attrs...)
			answerConflict(w, s)
		case actHeld:
			d.done(dec.outcome, dec.status, attrs...)
			answerHeld(w)
		case actInProgress:
			d.done(dec.outcome, dec.status)
			answerInProgress(w, s)
		case actWait:
			if d.wait(deadline) {
				continue // the first delivery finished or freed its claim: decide again
			}
			d.done(OutcomeInProgress, http.StatusConflict)
			answerInProgress(w, s)
		default:
			d.storeDown(fmt.Errorf("claim %s/%s: unexpected outcome %v", s.Name, d.key, res.Found))
		}
		return
	}
}

// claim claims the delivery's key in the store, or finds what holds it.
// A repeat of a done record the store's replay cache holds is answered
// from memory first, as the cache's Claim would answer it, without an
// owner, a request to keep or a deadline for a store call that is not
// made; it is still timed as the claim it stands for. now is the time
// read right before the call, or zero to read it here: the claim counts as
// sent then (claimSent: earlier than the store gets it, so the lease is
// never taken for longer than it is held).
func (d *delivery) claim(now time.Time) (res dedupe.ClaimResult, err error) {
	s := d.s
	if now.IsZero() {
		now = time.Now()
	}
	if m := d.p.memory; m != nil {
		if rec, ok := m.Duplicate(s.Name, d.key, d.hash); ok {
			d.p.m.observeStore("claim", now)
			return dedupe.ClaimResult{Found: dedupe.Duplicate, Record: rec}, nil
		}
	}
	d.owner = newOwner()
	ttl := s.TTL
	if s.Durable() {
		// A delivery given up at the end of retry_for stays a record
		// (an unretried event to redeliver) for a ttl more.
		ttl += s.RetryFor
	}
	req := dedupe.ClaimRequest{Sender: s.Name, Key: d.key, PayloadHash: d.hash, Owner: d.owner, Lease: s.Lease, TTL: ttl,
		Fingerprint: d.fp, Fingerprinter: d.fingerprinter}
	if s.StoreRequestBody {
		// Kept for conflict diffs and operator redelivery: the site
		// may check the signature headers, so they are kept too.
		req.RequestBody = d.body
		req.Request = &dedupe.StoredRequest{Method: d.r.Method, URI: d.r.URL.RequestURI(), Header: d.r.Header.Clone(), RemoteAddr: d.r.RemoteAddr}
	}
	d.claimSent = now
	err = d.p.storeCall(d.r, s, "claim", func(ctx context.Context) (err error) {
		res, err = d.p.store.Claim(ctx, req)
		return err
	})
	return res, err
}

// wait blocks until the key may have changed, the deadline passes, or the
// sender hangs up. It reports whether deciding again makes sense.
func (d *delivery) wait(deadline time.Time) bool {
	remaining := time.Until(deadline)
	if remaining <= 0 {
		return false
	}
	poll := 250 * time.Millisecond
	if poll > remaining {
		poll = remaining
	}
	ctx, cancel := context.WithTimeout(d.r.Context(), poll)
	defer cancel()
	local, leave := d.p.waiters.watch(d.s.Name, d.key)
	defer leave()
	if n, ok := d.p.store.(dedupe.Notifier); ok {
		go func() {
			_ = n.WaitChange(ctx, d.s.Name, d.key)
			cancel()
		}()
	}
	select {
	case <-local:
	case <-ctx.Done():
	}
	return d.r.Context().Err() == nil
}

func (d *delivery) storeDown(err error) {
	if d.s.OnStoreError == contract.StoreErrForward || d.s.Shadow() {
		// Fail open, as the operator chose: every such delivery is logged.
		d.done(OutcomeStoreError, 0, "err", err.Error(), "forwarded", true)
		d.forwardPlain()
		return
	}
	d.done(OutcomeStoreError, http.StatusServiceUnavailable, "err", err.Error())
	answerStoreDown(d.w)
}

// acceptedCopy reads, on the conflict path only, whether an operator
// accepted this delivery's payload under its key (Store.AcceptedConflict).
// A store error is answered as such (err), never read as "not accepted".
func (d *delivery) acceptedCopy() (dedupe.Conflict, bool, error) {
	var c dedupe.Conflict
	err := d.p.storeCall(d.r, d.s, "accepted_conflict", func(ctx context.Context) (err error) {
		c, err = d.p.store.AcceptedConflict(ctx, d.s.Name, d.key, d.hash)
		return err
	})
	switch {
	case errors.Is(err, dedupe.ErrNotFound):
		return c, false, nil
	case err != nil:
		return c, false, err
	}
	return c, true, nil
}

// recordConflict records a delivery refused (or, in shadow mode, that
// would be refused) as a conflict with stored; answeredDup marks one
// answered with stored's answer instead (changed_payload: duplicate). With store_request_body the
// refused request is kept beside it, as a claim keeps its request (the
// headers whole: the site may check a signature when an operator accepts
// it), its body at most max_stored_body bytes; and what changed against
// the kept original: JSON paths, or form field names as PHP reads them.
// Without store_request_body nothing of the payload is kept, and the
// conflict cannot be accepted.
func (d *delivery) recordConflict(stored dedupe.Record, answeredDup bool) {
	c := dedupe.Conflict{
		Sender: d.s.Name, Key: d.key, StoredHash: stored.PayloadHash, ReceivedHash: d.hash,
		ReceivedAt: time.Now(), ExpiresAt: time.Now().Add(d.s.TTL), Shadow: d.s.Shadow(), AnsweredDuplicate: answeredDup,
	}
	if d.s.StoreRequestBody {
		c.Request = &dedupe.StoredRequest{Method: d.r.Method, URI: d.r.URL.RequestURI(), Header: d.r.Header.Clone()}
		c.Body = d.body
		if max := d.s.MaxStoredBody; int64(len(c.Body)) > max {
			c.Body, c.BodyTruncated = c.Body[:max], true
		}
		if stored.RequestBody != nil {
			orig := stored.Request
			if orig == nil { // kept by a release that kept no head: JSON only
				orig = &dedupe.StoredRequest{Header: http.Header{}}
			}
			c.DiffKind, c.ChangedPaths = contract.ChangedBody(orig.Method, orig.Header, stored.RequestBody,
				d.r.Method, d.r.Header, d.body)
		}
	}
	if len(c.ChangedPaths) == 0 {
		// No bodies kept, or nothing changed in them (a GET callback's
		// fields are in its query): the fingerprints say which fields
		// changed, query and body, by name.
		if ch := d.changedFields(stored); len(ch) > 0 {
			c.DiffKind, c.ChangedPaths = dedupe.DiffFields, ch
		}
	}
	err := d.p.storeCall(d.r, d.s, "record_conflict", func(ctx context.Context) error {
		return d.p.store.RecordConflict(ctx, c)
	})
	if err != nil {
		d.log.Warn("conflict not recorded", "key", d.key, "err", err)
	}
}
