package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/proxy/internal/oneshot"
)

// forwardPlain hands the delivery to the site without a claim (shadow mode,
// missing_key: pass, on_store_error: forward).
//
// A delivery whose key was read (shadow mode, on_store_error: forward)
// carries the forward key header like a claimed one, so the site can pass
// a stable key on; one without a key (missing_key: pass, forwarded
// without dedupe, unmatched) goes as the sender sent it, but for the
// forward key header: a client's own is removed (dropHeader), since
// the site trusts that header to come from hookonce.
func (d *delivery) forwardPlain() {
	r := d.r.Clone(d.r.Context())
	r.Body = io.NopCloser(bytes.NewReader(d.body))
	r.ContentLength = int64(len(d.body))
	r.TransferEncoding = nil // the body read whole goes with its length (see forward)
	r.GetBody = nil
	if d.s != nil && d.key != "" && d.s.ForwardKeyHeader != "" {
		// Hop-by-hop headers are gone already (Inspect), so a sender's
		// Connection list cannot strip it.
		dropHeader(r.Header, d.s.ForwardKeyHeader)
		r.Header.Set(d.s.ForwardKeyHeader, d.s.Name+":"+d.key)
	} else {
		d.dropKeyHeaders(r.Header)
	}
	d.p.pass.ServeHTTP(d.w, r)
}

// dropKeyHeaders removes from h the forward key header of the delivery's
// sender, or, before one was chosen (unmatched), of every sender on its
// path: a forward that carries no key of hookonce's carries none of the
// client's either. Paths no sender names are streamed untouched: there
// hookonce is not what the site trusts for the header.
func (d *delivery) dropKeyHeaders(h http.Header) {
	if d.s != nil {
		dropHeader(h, d.s.ForwardKeyHeader)
		return
	}
	if d.rt != nil {
		for _, s := range d.rt.Senders {
			dropHeader(h, s.ForwardKeyHeader)
		}
	}
}

// forwardClaimed runs rows 5, 9, 10, 10a, 10b and 11: the delivery holds
// the claim, the site is called once, and its answer is stored or the
// claim freed.
func (d *delivery) forwardClaimed() {
	p, s := d.p, d.s
	defer p.waiters.fire(s.Name, d.key)
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		d.release(d.attempt(OutcomeReleased, http.StatusServiceUnavailable))
		d.done(OutcomeReleased, http.StatusServiceUnavailable, "reason", "shutdown")
		answerShuttingDown(d.w)
		return
	}
	p.inflight.Add(1)
	p.mu.Unlock()
	defer p.inflight.Done()

	// The heartbeat runs from here until the outcome is in the store, so
	// waiting for the business object and storing the answer may take as
	// long as they need (trap 6).
	beat := d.heartbeat()
	defer beat.stop()
	// Serialize: the object is taken once the event's claim is won, given
	// back once the answer is judged (deferred: after the outcome is
	// stored).
	if !d.takeObject() {
		return
	}
	defer d.freeObject()

	// Trap 2: the forward runs under hookonce's own deadline, not under the
	// sender's connection, so a sender that hangs up does not abort a site
	// that is mid-handler.
	ctx, cancel := context.WithTimeout(p.abortCtx, s.UpstreamTimeout)
	defer cancel()
	c := newCapture(d.w, s.MaxStoredBody)
	var keyHeader, keyValue string
	if s.ForwardKeyHeader != "" {
		keyHeader, keyValue = s.ForwardKeyHeader, s.Name+":"+d.key
	}
	ctx = oneshot.BeforeWrite(ctx, beat) // beat.BeforeWrite: leaseHeld
	if s.Ambiguous == contract.AmbiguousHold {
		// This sender's operator wants every ambiguous forward held for a
		// person: none may come from a kept connection that a restarting
		// site closed under the write (trap 32).
		ctx = oneshot.FreshConn(ctx)
	}
	if !p.capt.direct {
		// oneShot says how far the request got in its own error
		// (oneshot.SendError); any other RoundTripper is traced.
		ctx = httptrace.WithClientTrace(ctx, c.trace())
	}

	p.failAt("claimed")
	if err := d.leaseHeld(beat); err != nil {
		d.leaseLost(err)
		return
	}
	began := time.Now()
	p.capt.forward(ctx, d.r, d.body, keyHeader, keyValue, c)
	d.siteTime = time.Since(began)
	p.failAt("answered")
	p.m.observeSite(s.Name, d.siteTime)
	d.siteStatus = c.status

	err := c.failure()
	if errors.Is(err, errLeaseLost) { // the transport's own check, before its write
		d.leaseLost(err)
		return
	}
	how := classify(ctx, p.abortCtx, err, c.started(err))
	switch how {
	case unreachable:
		d.siteDown = p.siteDown.Add(1)
	case answered:
		p.siteDown.Store(0)
	}
	why := ""
	dec := decideForward(s, how, c.status, d.takeover, func() bool {
		ok, reason := s.Succeeded(d.req, c.status, c.body.Bytes())
		why = reason
		return ok
	})
	if how == answered {
		if dec.outcome == OutcomeReleased { // the site answered with a failure
			d.siteFailed = p.siteFail.Add(1)
		} else {
			p.siteFail.Store(0)
		}
	}
	att := d.attempt(dec.outcome, dec.status)
	beat.settling.Store(true)
	stored := true
	var attrs []any
	switch {
	case d.pending != nil: // a try of a durable delivery (durable.go)
		dec, attrs = d.settlePending(dec, how, c, att, beat)
	case dec.store == storeComplete:
		stored = d.complete(c, beat, att)
	case dec.store == storeHold:
		d.hold(att)
	case dec.store == storeRelease:
		d.release(att)
	}
	switch {
	case why != "":
		attrs = append(attrs, "reason", why)
	case err != nil:
		attrs = append(attrs, "err", err.Error())
	}
	if !stored {
		// The site ran, but its answer is not this event's record: the
		// claim was taken over (or the store stayed down past the lease),
		// and a retry may run the handler again.
		attrs = append(attrs, "stored", false)
	}
	if dec.reply == replyAmbiguous {
		attrs = append(attrs, "claim", s.Ambiguous)
	}
	d.done(dec.outcome, dec.status, attrs...)
	switch dec.reply {
	case replySite:
		writeCaptured(d.w, c)
	case replyUnreachable:
		answerSiteError(d.w, dec.status, "the site could not be reached; retry later")
	case replyShutdown:
		answerShuttingDown(d.w)
	case replyAmbiguous:
		if c.streamed() {
			answerCut() // the sender has part of an answer: it must see it cut
		}
		what := "the connection to the site broke after the request was sent"
		switch how {
		case timedOut:
			what = "the site did not answer within upstream_timeout"
		case abortedAtSite:
			what = "hookonce shut down while the site was handling the delivery"
			retryAfter(d.w, 5*time.Second)
		}
		answerSiteError(d.w, dec.status, what+"; the handler may have run")
	}
}
