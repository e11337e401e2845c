package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/hookonce/hookonce/contract"
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
	return now.Sub(lastTry(r)) > after
}

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
)

// Redelivery is what an operator's redelivery came to.
type Redelivery struct {
	Outcome string // as counted: processed, released, not_success, duplicate, in_progress, …
	Status  int    // the answer the site (or hookonce) gave
	Body    []byte // at most 4 KiB of it
}

// Redeliver sends an event's stored request to the site again through the
// normal claim path (fresh owner, lease, heartbeat, success rule, stored
// answer), recorded as an attempt by the operator. The signature is not
// checked again: it was when the request arrived, and a signed timestamp
// may have gone stale since. A done event is refused unless force. A held
// (or, forced, a done) record is first freed (Store.Free: released, its
// attempts kept, the operator's appended), which is logged.
func (p *Proxy) Redeliver(ctx context.Context, sender, key string, force bool) (Redelivery, error) {
	c := p.contract.Load()
	s := c.Sender(sender)
	if s == nil {
		return Redelivery{}, fmt.Errorf("redeliver %s/%s: %w", sender, key, ErrNoSender)
	}
	rec, err := p.store.Get(ctx, sender, key)
	if err != nil {
		return Redelivery{}, fmt.Errorf("redeliver %s/%s: %w", sender, key, err)
	}
	if rec.Request == nil || rec.RequestBody == nil {
		return Redelivery{}, fmt.Errorf("redeliver %s/%s: %w", sender, key, ErrNotKept)
	}
	switch rec.State {
	case dedupe.StateDone:
		if !force {
			return Redelivery{}, fmt.Errorf("redeliver %s/%s: %w", sender, key, ErrDone)
		}
		fallthrough
	case dedupe.StateUnknown:
		// The operator decides a held (or, forced, a done) event runs again.
		p.log.Warn("operator redelivery: releasing the record first", "sender", sender, "key", key, "state", rec.State, "force", force)
		att := dedupe.OperatorRelease(time.Now())
		att.Replica = p.replica
		if _, err := p.store.Free(ctx, sender, key, att); err != nil && !errors.Is(err, dedupe.ErrNotFound) {
			return Redelivery{}, fmt.Errorf("redeliver %s/%s: %w", sender, key, err)
		}
	case dedupe.StateProcessing:
		return Redelivery{}, fmt.Errorf("redeliver %s/%s: %w", sender, key, ErrInProgress)
	}

	res, err := p.deliverKept(ctx, c, s, key, rec.Request, rec.RequestBody)
	if err != nil {
		return Redelivery{}, fmt.Errorf("redeliver %s/%s: %w", sender, key, err)
	}
	return res, nil
}

// deliverKept sends a kept request to the site under (s, key) through the
// normal claim path, as an attempt by the operator: redelivery and the
// acceptance of a conflict (accept.go) both run here.
func (p *Proxy) deliverKept(ctx context.Context, c *contract.Contract, s *contract.Sender, key string, head *dedupe.StoredRequest, body []byte) (Redelivery, error) {
	r, err := http.NewRequestWithContext(ctx, head.Method, "http://redelivery"+head.URI, strings.NewReader(string(body)))
	if err != nil {
		return Redelivery{}, fmt.Errorf("stored request: %w", err)
	}
	r.Header = head.Header.Clone()
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r.RemoteAddr = "127.0.0.1:0" // the operator, on this host
	r.RequestURI = head.URI
	if u, err := url.ParseRequestURI(head.URI); err == nil {
		r.URL = u
	}
	rw := &recorder{header: http.Header{}}
	d := &delivery{p: p, c: c, s: s, w: rw, r: r, start: time.Now(), log: p.log.With("sender", s.Name, "by", dedupe.AttemptByOperator),
		by: dedupe.AttemptByOperator, body: body, key: key}
	path, _ := contract.NormalizePath(r.URL.EscapedPath())
	d.req = contract.NewRequest(r, path, body, c.ClientAddr(r.RemoteAddr, r.Header))
	if d.hash, d.legacyHash, err = s.RequestHash(d.req); err != nil {
		return Redelivery{}, err
	}
	d.claimLoop()
	return Redelivery{Outcome: d.outcome, Status: rw.status, Body: rw.body}, nil
}

// recorder is the ResponseWriter of a redelivery: the operator gets the
// status and the first bytes of the answer.
type recorder struct {
	header http.Header
	status int
	body   []byte
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if room := 4<<10 - len(r.body); room > 0 {
		r.body = append(r.body, b[:min(room, len(b))]...)
	}
	return len(b), nil
}
