package proxy

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// complete stores the final answer (false: it is not, and a retry may run
// the handler again), retrying a store that is down for as
// long as the lease is surely ours (the heartbeat keeps renewing it), so a
// store blip of a few seconds loses no answer. Past that, a retry after
// the lease would run the handler again: logged and counted.
//
// An answer counts as stored only on the store's word: a Complete that
// succeeded, or, after one whose reply was lost, a confirmed read
// (storedByUs) that finds it. A read the store cannot confirm (PostgreSQL:
// a commit that may be on the primary alone, trap 35) is no answer either
// way: keep trying while the lease lasts, then report it as not stored.
func (d *delivery) complete(c *capture, b *beat, att dedupe.Attempt) (stored bool) {
	resp := storable(d.s, c)
	pause := 100 * time.Millisecond
	// unconfirmed: an attempt was applied but the store's replicas did not
	// confirm it (Redis wait_replicas): the record then reads as stored
	// where a failover may still lose it, so after it only a confirmed read
	// (a dedupe.ConfirmedReader store) proves anything.
	unconfirmed := false
	for attempt := 1; ; attempt++ {
		err := d.p.storeCall(d.r, d.s, "complete", func(ctx context.Context) error {
			return d.p.store.Complete(ctx, d.s.Name, d.key, d.owner, resp, att)
		})
		if err == nil {
			return true
		}
		unconfirmed = unconfirmed || errors.Is(err, dedupe.ErrNotConfirmed)
		readable := !unconfirmed || d.p.confirmsReads
		if errors.Is(err, dedupe.ErrNotOwner) {
			if attempt == 1 || !readable {
				return d.notStored("answer not stored: the claim was taken over or released meanwhile")
			}
			// An earlier attempt may have committed, only its reply lost.
			ours, rerr := d.storedByUs()
			switch {
			case ours:
				return true
			case rerr == nil:
				return d.notStored("answer not stored: the claim was taken over or released meanwhile")
			}
			err = rerr // unknown: try again while the claim is surely ours
		}
		// Another try only while the claim is surely still ours.
		if b.leaseLeft() <= pause {
			// A write the store applied after its reply was lost (a frozen
			// or cut database) is not a lost answer: look before saying so.
			if !readable {
				return d.notStored("answer not stored before the lease ran out (the store's replicas did not confirm it): a retry will run the handler again",
					"attempts", attempt, "err", err)
			}
			if ours, rerr := d.storedByUs(); ours {
				return true
			} else if rerr != nil {
				return d.notStored("answer not stored before the lease ran out (the store did not confirm it): a retry will run the handler again",
					"attempts", attempt, "err", err, "confirm_err", rerr)
			}
			return d.notStored("answer not stored before the lease ran out: a retry will run the handler again", "attempts", attempt, "err", err)
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Second)
	}
}

// notStored logs and counts an answer that is not this event's record.
func (d *delivery) notStored(msg string, attrs ...any) bool {
	d.p.m.notStored.WithLabelValues(d.s.Name).Inc()
	d.log.Error(msg, append([]any{"key", d.key}, attrs...)...)
	return false
}

// storedByUs tells, after a Complete whose reply was lost (trap 12), whether
// it committed: the record is done with this delivery's payload and the
// answer the site gave is there. Never retry a write blindly; re-read, and
// only with a read the store confirms (trap 35): an error means the store
// could not say, which is not a yes.
func (d *delivery) storedByUs() (bool, error) {
	var rec dedupe.Record
	err := d.p.storeCall(d.r, d.s, "get", func(ctx context.Context) (err error) {
		rec, err = d.p.confirmedGet(ctx, d.s.Name, d.key)
		return err
	})
	if errors.Is(err, dedupe.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return rec.State == dedupe.StateDone && rec.PayloadHash == d.hash &&
		rec.Response != nil && rec.Response.Status == d.siteStatus, nil
}

// attempt describes this delivery's turn at the site, as the record keeps it.
func (d *delivery) attempt(outcome string, status int) dedupe.Attempt {
	return dedupe.Attempt{At: d.start, By: d.by, Outcome: outcome, Status: status,
		Duration: d.siteTime, Replica: d.p.replica, Wait: d.objectWait}
}

func (d *delivery) release(att dedupe.Attempt) {
	if d.unclaimed {
		return // forwarded without dedupe: there is no claim to free
	}
	if d.pending != nil {
		d.giveBack(att) // an owed delivery is tried again, never freed
		return
	}
	err := d.p.storeCall(d.r, d.s, "release", func(ctx context.Context) error {
		return d.p.store.Release(ctx, d.s.Name, d.key, d.owner, att)
	})
	if err != nil && !errors.Is(err, dedupe.ErrNotOwner) {
		d.log.Warn("claim not released: it frees itself when its lease ends", "key", d.key, "outcome", att.Outcome, "err", err)
	}
}

// leaseLost gives back a claim whose lease ran out before the site was
// called: nothing reached the site, the sender is told to retry, and the
// release is fenced, so it frees the claim only if no one took it over.
func (d *delivery) leaseLost(err error) {
	d.release(d.attempt(OutcomeReleased, http.StatusServiceUnavailable))
	d.done(OutcomeReleased, http.StatusServiceUnavailable, "reason", "lease lost before the forward", "err", err.Error())
	answerLeaseLost(d.w)
}

func (d *delivery) hold(att dedupe.Attempt) {
	err := d.p.storeCall(d.r, d.s, "hold", func(ctx context.Context) error {
		return d.p.store.Hold(ctx, d.s.Name, d.key, d.owner, att)
	})
	switch {
	case errors.Is(err, dedupe.ErrNotConfirmed):
		// Held where the store took it; a failover may still lose the
		// hold, and the claim then frees itself at its lease.
		d.log.Warn("claim held but not confirmed by the store's replicas: after a failover it frees itself when its lease ends", "key", d.key, "err", err)
	case err != nil:
		d.log.Warn("claim not held: it frees itself when its lease ends", "key", d.key, "err", err)
	}
}
