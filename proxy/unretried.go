package proxy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// Events that never completed: every failure path frees the claim and
// trusts the sender to retry, and senders give up. A record left released
// (or held unknown) with no attempt for longer than its sender's retry
// window is unretried: counted, logged once, listed, and an operator can
// deliver it again from what was stored.

// unretriedScanLimit bounds the records one scan reads per sender and state.
const unretriedScanLimit = 1000

// Unretried returns the events of sender (all senders when "") that are
// released or held with no attempt within their sender's retry window, as
// judged at now. Records of senders no longer in the config are skipped.
func (p *Proxy) Unretried(ctx context.Context, sender string, now time.Time) ([]dedupe.Record, error) {
	c := p.contract.Load()
	var out []dedupe.Record
	for _, s := range c.Senders {
		if sender != "" && s.Name != sender {
			continue
		}
		for _, st := range []dedupe.State{dedupe.StateReleased, dedupe.StateUnknown} {
			recs, err := p.store.List(ctx, dedupe.ListFilter{Sender: s.Name, State: st, Limit: unretriedScanLimit})
			if err != nil {
				return nil, fmt.Errorf("list %s %s: %w", s.Name, st, err)
			}
			for _, r := range recs {
				if IsUnretried(r, s.UnretriedAfter(), now) {
					out = append(out, r)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return lastTry(out[i]).After(lastTry(out[j])) })
	return out, nil
}

// IsUnretried reports whether r was left released or held with no attempt
// for longer than after (its sender's Sender.UnretriedAfter).
func IsUnretried(r dedupe.Record, after time.Duration, now time.Time) bool {
	if r.State != dedupe.StateReleased && r.State != dedupe.StateUnknown {
		return false
	}
	if givenUp(r) {
		return true // no sender's retry will come: it was answered by hookonce
	}
	return now.Sub(lastTry(r)) > after
}

// givenUp reports whether r is a durable delivery hookonce gave up:
// released (or held) by a try of its own.
func givenUp(r dedupe.Record) bool { return r.LastAttempt().By == dedupe.AttemptByDurable }

func lastTry(r dedupe.Record) time.Time {
	if a := r.LastAttempt(); !a.At.IsZero() {
		return a.At
	}
	return r.ReceivedAt
}

// WatchUnretried scans for unretried events every interval until ctx ends:
// it sets hookonce_unretried_events{sender} and logs each newly unretried
// event once, at warn.
func (p *Proxy) WatchUnretried(ctx context.Context, every time.Duration) {
	seen := map[[2]string]time.Time{} // logged events, by their last attempt
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		p.scanUnretried(ctx, seen)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Proxy) scanUnretried(ctx context.Context, seen map[[2]string]time.Time) {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	recs, err := p.Unretried(sctx, "", time.Now())
	if err != nil {
		p.log.Warn("unretried events not counted", "err", err)
		return
	}
	counts := map[string]float64{}
	now := map[[2]string]time.Time{}
	for _, r := range recs {
		counts[r.Sender]++
		k := [2]string{r.Sender, r.Key}
		now[k] = lastTry(r)
		if !seen[k].Equal(now[k]) {
			last := r.LastAttempt()
			p.log.Warn("event never completed and its sender stopped retrying: redeliver it or release it",
				"sender", r.Sender, "key", r.Key, "state", r.State, "attempts", len(r.Attempts),
				"last_attempt", lastTry(r).UTC().Format(time.RFC3339), "last_outcome", last.Outcome, "last_status", last.Status)
			if !givenUp(r) { // told when it was given up (NoticeGivenUp)
				p.noticeUnretried(r)
			}
		}
	}
	for k := range seen {
		delete(seen, k)
	}
	for k, v := range now {
		seen[k] = v
	}
	for _, s := range p.contract.Load().Senders {
		p.m.unretried.WithLabelValues(s.Name).Set(counts[s.Name])
	}
}

// Redelivery refusals, for callers to tell apart.
var (
	ErrNotKept    = errors.New("the request was not kept (store_request_body is off for this sender)")
	ErrDone       = errors.New("the event is done; redelivering it would run the handler again (use force)")
	ErrInProgress = errors.New("a delivery of this event is at the site")
	ErrNoSender   = errors.New("no such sender in the current config")
	ErrOwed       = errors.New("hookonce still owes this delivery to the site (ack: durable) and tries it until the site takes it; wait for its next try (hookonce lookup), or release it first")
)
