package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
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
	if rec.Pending != nil {
		// A try of hookonce's own may be at the site now: a second
		// delivery beside it could run the handler twice.
		return Redelivery{}, fmt.Errorf("redeliver %s/%s: %w", sender, key, ErrOwed)
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
	d.req = c.Request(r, path, body)
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
