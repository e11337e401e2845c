package proxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
)

// Durable acceptance (a sender's ack: durable, docs/durable.md): once the
// delivery is claimed, it is stored as owed (dedupe.Deferrer.Defer) and
// the sender is answered by hookonce with the success answer the contract
// builds (contract.Sender.Acknowledgement). The site gets the delivery
// from a try of its own: the first starts at once, holding the lease
// Defer gave it; later ones are taken from the store by RunDurable, on
// any replica, once due. A try is a claimed forward like any other
// (forwardClaimed: heartbeat, serialize, the lease checked before the
// write, the success rule) whose outcome is stored as the pending
// delivery's (settlePending): delivered, retried after a backoff, held,
// or given up (an unretried event).

// OutcomeAccepted: hookonce answered the sender itself (ack: durable)
// once the delivery was stored; the site gets it from hookonce.
const OutcomeAccepted = "accepted"

// OutcomeBacklogFull: a durable sender's owed deliveries reached its
// ack_backlog; nothing was stored, the sender is asked to retry.
const OutcomeBacklogFull = "backlog_full"

// DefaultDurableBackoff is when a failed try is tried again: the n-th
// retry after the n-th entry, the last repeated until retry_for ends.
var DefaultDurableBackoff = []time.Duration{
	5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute,
	5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute, time.Hour,
}

// durableTriesPerSender bounds the tries of one sender at the site from
// one process at once (each holds its body and the site's answer): a
// delivery deferred while as many run is left to RunDurable, due at once.
const durableTriesPerSender = 16

// durable is the proxy's state for durable deliveries.
type durable struct {
	store   dedupe.Deferrer // nil when the store keeps none
	backoff []time.Duration
	poll    time.Duration
	kick    chan struct{}

	mu      sync.Mutex
	owed    map[string]int64     // sender → owed deliveries as last counted, plus those deferred here since
	adds    map[string]int64     // sender → deliveries deferred here, ever (owed is recounted from it)
	settles map[string]int64     // sender → owed deliveries this process ended (delivered, given up, held), ever
	running map[string]int       // sender → this process's tries at the site
	toldOld map[string]time.Time // sender → when NoticeBacklogOld was last given
	// toldOrphan: sender → when its owed deliveries were last said to
	// have no sender in the config (orphanedOwed).
	toldOrphan map[string]time.Time
	// show puts a sender's owed count into its gauge, as it changes here:
	// the recount (countPending) only runs every few polls, and an
	// operator (or a drain) reading 0 while a burst is still owed would be
	// told the site has everything. Called under mu, so counts land in
	// order; nil: no gauge.
	show func(sender string, owed int64)
}

func newDurable(store dedupe.Store, backoff []time.Duration, poll time.Duration) *durable {
	d := &durable{backoff: backoff, poll: poll, kick: make(chan struct{}, 1),
		owed: map[string]int64{}, adds: map[string]int64{}, settles: map[string]int64{}, running: map[string]int{}, toldOld: map[string]time.Time{}, toldOrphan: map[string]time.Time{}}
	d.store, _ = store.(dedupe.Deferrer)
	if len(d.backoff) == 0 {
		d.backoff = DefaultDurableBackoff
	}
	if d.poll <= 0 {
		d.poll = time.Second
	}
	return d
}

// retryIn is the wait before the try after tries failed ones.
func (u *durable) retryIn(tries int) time.Duration {
	return u.backoff[min(max(tries, 1), len(u.backoff))-1]
}

func (u *durable) wake() {
	select {
	case u.kick <- struct{}{}:
	default:
	}
}

// full reports whether s's owed deliveries reached its ack_backlog.
func (u *durable) full(s *contract.Sender) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.owed[s.Name] >= int64(s.AckBacklog)
}

func (u *durable) added(sender string) {
	u.mu.Lock()
	u.owed[sender]++
	u.adds[sender]++
	u.shown(sender)
	u.mu.Unlock()
}

// shown gives the gauge sender's owed count; u.mu is held.
func (u *durable) shown(sender string) {
	if u.show != nil {
		u.show(sender, u.owed[sender])
	}
}

// hourly reports whether sender was last told (by told, a map of u's)
// an hour ago or never, and if so marks it told now.
func (u *durable) hourly(told map[string]time.Time, sender string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if last, ok := told[sender]; ok && time.Since(last) < time.Hour {
		return false
	}
	told[sender] = time.Now()
	return true
}

// ended counts an owed delivery of sender this process ended.
func (u *durable) ended(sender string) {
	u.mu.Lock()
	u.owed[sender] = max(0, u.owed[sender]-1)
	u.settles[sender]++
	u.shown(sender)
	u.mu.Unlock()
}

// start counts a try of sender as running; false when sender has
// durableTriesPerSender at the site already.
func (u *durable) start(sender string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.running[sender] >= durableTriesPerSender {
		return false
	}
	u.running[sender]++
	return true
}

func (u *durable) end(sender string) {
	u.mu.Lock()
	u.running[sender]--
	u.mu.Unlock()
	u.wake()
}

// pendingTry is what a try of an owed delivery knows beyond a delivery.
type pendingTry struct {
	tries int       // tries that failed before this one
	until time.Time // when hookonce stops trying (by this process's clock)
	// sender is who answers the sender, for a first try its request
	// waits on (ack_after); nil otherwise (the sender was acknowledged).
	// The try and the waiting request race for it once: whoever moves it
	// from senderWaits decides whether the sender gets the site's answer
	// (senderSite, stored as the record's answer) or the acknowledgement
	// (senderAcked). Exact repeats then get what the sender got.
	sender *atomic.Int32
	// result is set once the try's outcome is stored.
	result tryResult
}

// Who answers a sender waiting on its delivery's first try.
const (
	senderWaits int32 = iota + 1
	senderSite
	senderAcked
)

// siteAnswers reports whether the sender gets the site's own answer:
// it still waits for it (and is told so now).
func (pt *pendingTry) siteAnswers() bool {
	return pt.sender != nil && pt.sender.CompareAndSwap(senderWaits, senderSite)
}

// tryResult is how a try ended, for the sender's request waiting on its
// first try (ack_after).
type tryResult struct {
	// answer is the site's own final answer (delivered, or refused for
	// good) for the sender; nil when the sender gets the acknowledgement.
	answer  *dedupe.Response
	outcome string
}

// backlogFull answers a durable sender whose backlog is full, before
// anything is claimed.
func (d *delivery) backlogFull() bool {
	s := d.s
	if !s.Durable() || d.by != dedupe.AttemptBySender || d.p.durable.store == nil || !d.p.durable.full(s) {
		return false
	}
	d.done(OutcomeBacklogFull, http.StatusServiceUnavailable, "ack_backlog", s.AckBacklog)
	retryAfter(d.w, time.Minute)
	http.Error(d.w, "hookonce: too many deliveries of this sender are waiting for the site; retry later", http.StatusServiceUnavailable)
	return true
}

// forwardDurable is row 5 for a durable sender: the claimed delivery is
// stored as owed, the sender answered by hookonce (or, within ack_after,
// by the site), and the site gets it from a try of its own.
func (d *delivery) forwardDurable() {
	p, s := d.p, d.s
	status, header, body := s.Acknowledgement(d.req)
	ack := dedupe.Response{Status: status, Header: header, Body: body}
	// The first try starts here, holding the lease Defer gives it, when
	// the sender has room for one; else the delivery is due at once for
	// RunDurable.
	now := p.durable.start(s.Name)
	lease := s.Lease
	if !now {
		lease = 0
	}
	asked := time.Now()
	err := p.storeCall(d.r, s, "defer", func(ctx context.Context) error {
		return p.durable.store.Defer(ctx, s.Name, d.key, d.owner, dedupe.DeferRequest{Ack: ack, RetryFor: s.RetryFor, Lease: lease})
	})
	if err != nil {
		if now {
			p.durable.end(s.Name)
		}
		// Nothing the sender was told about is owed: free the claim
		// (fenced, so a Defer applied after all keeps it, and its lease
		// hands it to a try later) and ask for a retry.
		d.release(d.attempt(OutcomeStoreError, http.StatusServiceUnavailable))
		d.done(OutcomeStoreError, http.StatusServiceUnavailable, "err", err.Error(), "ack", "durable")
		answerStoreDown(d.w)
		return
	}
	p.durable.added(s.Name)
	if !now {
		p.durable.wake()
		d.done(OutcomeAccepted, status, "retry_for", s.RetryFor.String(), "first_try", "queued")
		writeResponse(d.w, &ack)
		return
	}
	r := d.r.Clone(context.WithoutCancel(d.r.Context()))
	t := &delivery{p: p, c: d.c, s: s, w: &recorder{header: http.Header{}}, r: r, start: time.Now(),
		log: d.log.With("by", dedupe.AttemptByDurable), by: dedupe.AttemptByDurable, body: d.body, key: d.key,
		hash: d.hash, owner: d.owner, claimSent: asked, req: d.req, object: d.object, objectErr: d.objectErr,
		pending: &pendingTry{until: asked.Add(s.RetryFor)}}
	if s.AckAfter > 0 {
		t.pending.sender = &atomic.Int32{}
		t.pending.sender.Store(senderWaits)
	}
	res := make(chan tryResult, 1)
	go func() {
		defer p.durable.end(s.Name)
		t.forwardClaimed()
		res <- t.pending.result
	}()
	if s.AckAfter > 0 {
		timer := time.NewTimer(s.AckAfter)
		defer timer.Stop()
		var tr tryResult
		select {
		case tr = <-res:
		case <-timer.C:
		case <-d.r.Context().Done():
		}
		if tr.outcome == "" && !t.pending.sender.CompareAndSwap(senderWaits, senderAcked) {
			// The try took the sender a moment ago: its answer is being
			// stored as the record's; the sender gets it.
			tr = <-res
		}
		if tr.answer != nil {
			// The site answered in time: the sender gets its answer, as
			// without ack: durable.
			d.siteStatus, d.siteTime = t.siteStatus, t.siteTime
			d.done(tr.outcome, tr.answer.Status, "ack", "site")
			writeResponse(d.w, tr.answer)
			return
		}
	}
	d.done(OutcomeAccepted, status, "retry_for", s.RetryFor.String())
	writeResponse(d.w, &ack)
}

// writeResponse writes a stored answer as the sender's own (no replay
// header: this delivery is not a repeat).
func writeResponse(w http.ResponseWriter, resp *dedupe.Response) {
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = vs[:len(vs):len(vs)]
	}
	body := resp.Body
	if resp.Truncated {
		body = nil
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.Status)
	_, _ = w.Write(body)
}

// settlePending stores how a try ended (the delivery's decision dec on an
// ending how), and returns the decision as logged: a released try is
// retried after its backoff, or given up when the site refused it for good
// (a 4xx other than 408, 425, 429) or retry_for ends before the next try.
// The write is retried while the lease is surely ours: past it, another
// try may run, and a delivered answer lost here runs the handler again.
func (d *delivery) settlePending(dec forwardDecision, how ending, c *capture, att dedupe.Attempt, b *beat) (forwardDecision, []any) {
	pt := d.pending
	st := dedupe.PendingSettle{Attempt: att}
	var attrs []any
	switch dec.store {
	case storeComplete:
		st.Outcome = dedupe.SettleDelivered
		attrs = []any{"durable", "delivered"}
		if pt.siteAnswers() {
			// The sender gets the site's answer: it is the record's
			// answer from now on, for the sender's repeats. Otherwise
			// they keep getting the acknowledgement the sender got.
			resp := storable(d.s, c)
			st.Response, pt.result.answer = &resp, &resp
		}
	case storeHold:
		st.Outcome = dedupe.SettleHold
		attrs = []any{"durable", "held"}
	default:
		next := d.p.durable.retryIn(pt.tries + 1)
		refused := how == answered && c.status >= 400 && c.status < 500 && !d.s.FinalStatuses.Final(c.status) && !retryableStatus(c.status)
		switch {
		case refused:
			st.Outcome = dedupe.SettleGiveUp
			attrs = []any{"durable", "given_up", "given_up_because", "the site refused the delivery: it is not tried again; redeliver it once the site takes it"}
			if pt.siteAnswers() {
				resp := storable(d.s, c)
				pt.result.answer = &resp
			}
		case time.Now().Add(next).After(pt.until):
			st.Outcome = dedupe.SettleGiveUp
			attrs = []any{"durable", "given_up", "given_up_because", "retry_for ran out", "tries", pt.tries + 1}
		default:
			st.Outcome, st.RetryIn = dedupe.SettleRetry, next
			attrs = []any{"durable", "retry", "retry_in", next.String(), "tries", pt.tries + 1}
		}
	}
	pt.result.outcome = dec.outcome
	pause := 100 * time.Millisecond
	for {
		err := d.p.storeCall(d.r, d.s, "settle_pending", func(ctx context.Context) error {
			return d.p.durable.store.SettlePending(ctx, d.s.Name, d.key, d.owner, st)
		})
		if err == nil {
			break
		}
		if errors.Is(err, dedupe.ErrNotOwner) || b == nil || b.leaseLeft() <= pause {
			d.p.m.notStored.WithLabelValues(d.s.Name).Inc()
			d.log.Error("durable delivery's outcome not stored: another try may run it again", "key", d.key, "err", err)
			attrs = append(attrs, "stored", false)
			pt.result.answer = nil
			return dec, attrs
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Second)
	}
	if st.Outcome != dedupe.SettleRetry {
		d.p.durable.ended(d.s.Name)
	}
	if st.Outcome == dedupe.SettleGiveUp {
		d.p.noticeGivenUp(d.s.Name, d.key, att)
	}
	return dec, attrs
}

// retryableStatus: a 4xx that asks for a retry.
func retryableStatus(st int) bool { return st == 408 || st == 425 || st == 429 }

// giveBack ends a try that never reached the site (shutdown, the object
// busy, the lease lost before the write): tried again after its backoff,
// the attempt recorded.
func (d *delivery) giveBack(att dedupe.Attempt) {
	st := dedupe.PendingSettle{Outcome: dedupe.SettleRetry, Attempt: att, RetryIn: d.p.durable.retryIn(d.pending.tries + 1)}
	err := d.p.storeCall(d.r, d.s, "settle_pending", func(ctx context.Context) error {
		return d.p.durable.store.SettlePending(ctx, d.s.Name, d.key, d.owner, st)
	})
	if err != nil && !errors.Is(err, dedupe.ErrNotOwner) {
		d.log.Warn("durable delivery not given back: it is tried again when its lease ends", "key", d.key, "err", err)
	}
}

// renewLease renews the delivery's lease: its claim's, or a try's on the
// pending delivery.
func (d *delivery) renewLease(ctx context.Context) error {
	if d.pending != nil {
		return d.p.durable.store.RenewPending(ctx, d.s.Name, d.key, d.owner, d.s.Lease)
	}
	return d.p.store.Renew(ctx, d.s.Name, d.key, d.owner, d.s.Lease)
}

// RunDurable delivers owed deliveries until ctx ends: every poll (or when
// a try ends) it takes the due ones of each sender from the store, and
// every few seconds it counts them for the gauges and ack_backlog.
func (p *Proxy) RunDurable(ctx context.Context) {
	if p.durable.store == nil {
		return
	}
	t := time.NewTicker(p.durable.poll)
	defer t.Stop()
	var counted time.Time
	for {
		if time.Since(counted) >= 5*p.durable.poll || counted.IsZero() {
			p.countPending(ctx)
			counted = time.Now()
		}
		p.takeDue(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.durable.kick:
		}
	}
}

// takeDue starts a try for each due delivery of each sender, as many as
// the sender has room for.
func (p *Proxy) takeDue(ctx context.Context) {
	p.mu.Lock()
	closing := p.closing
	p.mu.Unlock()
	if closing {
		return
	}
	c := p.contract.Load()
	for _, s := range c.Senders {
		if !s.Durable() && !p.owes(s.Name) {
			continue
		}
		p.durable.mu.Lock()
		room := durableTriesPerSender - p.durable.running[s.Name]
		p.durable.mu.Unlock()
		if room <= 0 {
			continue
		}
		owner := newOwner()
		asked := time.Now()
		var recs []dedupe.Record
		sctx, cancel := context.WithTimeout(ctx, s.StoreTimeout)
		err := func() (err error) {
			defer p.m.observeStore("take_due", asked)
			recs, err = p.durable.store.TakeDue(sctx, s.Name, owner, s.Lease, room)
			return err
		}()
		cancel()
		if err != nil {
			p.log.Warn("owed deliveries not taken: tried again shortly", "sender", s.Name, "err", err)
			continue
		}
		for _, rec := range recs {
			t, err := p.storedTry(c, s, rec, owner, asked)
			if err != nil {
				p.log.Error("owed delivery cannot be sent: its kept request is unreadable", "sender", s.Name, "key", rec.Key, "err", err)
				continue
			}
			if !p.durable.start(s.Name) {
				break // its lease lets another take it
			}
			go func() {
				defer p.durable.end(s.Name)
				t.forwardClaimed()
			}()
		}
	}
}

func (p *Proxy) owes(sender string) bool {
	p.durable.mu.Lock()
	defer p.durable.mu.Unlock()
	return p.durable.owed[sender] > 0
}

// storedTry builds a try of an owed delivery from its record, as the
// sender sent it: method, target, headers, body and address.
func (p *Proxy) storedTry(c *contract.Contract, s *contract.Sender, rec dedupe.Record, owner string, asked time.Time) (*delivery, error) {
	head, pend := rec.Request, rec.Pending
	if head == nil || rec.RequestBody == nil || pend == nil {
		return nil, errors.New("no kept request")
	}
	r, err := http.NewRequestWithContext(context.Background(), head.Method, "http://durable"+head.URI, strings.NewReader(string(rec.RequestBody)))
	if err != nil {
		return nil, fmt.Errorf("stored request: %w", err)
	}
	r.Header = head.Header.Clone()
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r.RemoteAddr = head.RemoteAddr
	if r.RemoteAddr == "" {
		r.RemoteAddr = "127.0.0.1:0"
	}
	r.RequestURI = head.URI
	if u, err := url.ParseRequestURI(head.URI); err == nil {
		r.URL = u
	}
	path, _ := contract.NormalizePath(r.URL.EscapedPath())
	d := &delivery{p: p, c: c, s: s, w: &recorder{header: http.Header{}}, r: r, start: time.Now(),
		log: p.senderLog(s).With("by", dedupe.AttemptByDurable), by: dedupe.AttemptByDurable, body: rec.RequestBody,
		key: rec.Key, hash: rec.PayloadHash, owner: owner, claimSent: asked,
		// until by this process's clock: the store's Until, as far off
		// as it is by the store's own now (judged at the take).
		pending: &pendingTry{tries: pend.Tries, until: asked.Add(pend.Until.Sub(pend.LeaseUntil.Add(-s.Lease)))}}
	d.req = c.Request(r, path, d.body)
	if s.Serialize != nil {
		d.object, d.objectErr = s.ObjectKey(d.req)
	}
	return d, nil
}

// countPending reads the owed deliveries per sender into the gauges and
// the backlog counts.
func (p *Proxy) countPending(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p.durable.mu.Lock()
	before := maps.Clone(p.durable.adds) // deferred during the count: not in it
	beforeEnd := maps.Clone(p.durable.settles)
	p.durable.mu.Unlock()
	counts, err := p.durable.store.PendingCounts(sctx)
	if err != nil {
		p.log.Warn("owed deliveries not counted", "err", err)
		return
	}
	now := time.Now()
	owed := map[string]int64{}
	oldest := map[string]float64{}
	for _, c := range counts {
		owed[c.Sender] = c.N
		oldest[c.Sender] = max(0, now.Sub(c.Oldest).Seconds())
		if c.N > 0 && now.Sub(c.Oldest) > BacklogOldAfter {
			p.noticeBacklogOld(c.Sender, c.N, c.Oldest)
		}
	}
	// Deliveries added or settled while the store counted are added or
	// taken off here; one whose write the count saw but whose add or
	// settle came after the snapshot above is counted twice (or not at
	// all) until the next recount.
	p.durable.mu.Lock()
	for name, n := range p.durable.adds {
		owed[name] += n - before[name]
	}
	for name, n := range p.durable.settles {
		owed[name] = max(0, owed[name]-(n-beforeEnd[name]))
	}
	p.durable.owed = owed
	// The gauges under mu: a try ending meanwhile (durable.ended) sets
	// them after this, not before.
	seen := map[string]bool{}
	var orphans []string
	for _, s := range p.contract.Load().Senders {
		seen[s.Name] = true
		if s.Ack == contract.AckDurable || owed[s.Name] > 0 {
			p.m.showOwed(s.Name, owed[s.Name])
			p.m.oldestPending.WithLabelValues(s.Name).Set(oldest[s.Name])
		}
	}
	for name, n := range owed {
		if !seen[name] && n > 0 {
			p.m.showOwed(name, n)
			p.m.oldestPending.WithLabelValues(name).Set(oldest[name])
			orphans = append(orphans, name)
		}
	}
	p.durable.mu.Unlock()
	for _, name := range orphans {
		p.orphanedOwed(name, owed[name])
	}
}

// orphanedOwed says, once an hour per sender, that a sender no longer in
// the config still has owed deliveries: nothing tries them (its rules are
// gone), nothing gives them up.
func (p *Proxy) orphanedOwed(sender string, n int64) {
	if !p.durable.hourly(p.durable.toldOrphan, sender) {
		return
	}
	p.log.Warn("deliveries owed to the site by a sender no longer in the config: nothing delivers them; put the sender back, or list and release them",
		"sender", sender, "owed", n, "list", "hookonce list --status pending --sender "+sender)
}
