// Package proxy is hookonce's http.Handler: it routes each request to its
// sender's rules, runs the decision table (docs/decision-table.md) against the store,
// forwards deliveries to the site, and answers the sender.
//
// Requests that match no sender are streamed to the site untouched. The
// package never imports a store backend: it talks to dedupe.Store only.
package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
)

// DefaultKeepIdle is serve's --upstream-keepalive: short enough that no
// common server closes a connection for idleness first (5 s is the
// shortest default: Apache's, Node's), long enough to carry every
// connection from one webhook to the next under load.
const DefaultKeepIdle = 500 * time.Millisecond

// Options configure a Proxy. Upstream, Contract and Store are required.
type Options struct {
	Upstream *url.URL
	Contract *contract.Contract
	Store    dedupe.Store
	// Logger receives one line per webhook decision; nil discards.
	Logger *slog.Logger
	// Registerer receives the proxy's metrics; nil leaves them unregistered.
	Registerer prometheus.Registerer
	// Transport forwards to the site; nil means a transport tuned for one
	// local upstream.
	Transport http.RoundTripper
	// KeepIdle is how long a connection to an http:// site may wait for
	// the next webhook forward once an answer left it reusable (trap 32);
	// 0: every forward dials a connection of its own. It applies only when
	// Transport is nil or an *http.Transport.
	KeepIdle time.Duration
	// Now judges signature timestamps; nil means time.Now. Leases and
	// expiry are judged by the store's clock, never by this one.
	Now func() time.Time
	// HitFlushInterval is how often replay counts are written; 0 means 1s.
	HitFlushInterval time.Duration
	// Replica names this instance in the attempts it records; "" means
	// the host name and process id.
	Replica string
	// Failpoint, when set, is called at named points of a forward
	// ("claimed": the claim is taken, the site not yet called; "answered":
	// the site answered, the outcome not yet stored), for fault tests that
	// kill the process exactly there. nil in production.
	Failpoint func(point string)
}

// Proxy is the sidecar's request handler.
type Proxy struct {
	contract atomic.Pointer[contract.Contract]
	store    dedupe.Store
	log      *slog.Logger
	m        *metrics
	now      func() time.Time
	pass     *httputil.ReverseProxy
	capt     *httputil.ReverseProxy
	hits     *hitCounter
	traffic  *trafficCounter // the readiness report's counters (traffic.go)
	failAt   func(point string)
	replica  string
	waiters  waiters
	objects  objectQueues        // local queues of deliveries per business object (serialize)
	locker   dedupe.ObjectLocker // the store's object locks; nil when it has none
	held     atomic.Int64        // deliveries whose body is in, being handled (max_inflight)
	siteDown atomic.Int64        // forwards in a row that found the site unreachable
	// bodyBytes is the request body memory reserved by deliveries being
	// received or handled, bounded by max_inflight × max_body.
	bodyBytes atomic.Int64
	refused   refusals // refusals past max_inflight, for the log

	// abortCtx is cancelled when a shutdown stops waiting for forwards;
	// every forward runs under it instead of under the sender's request.
	abortCtx context.Context
	abort    context.CancelFunc
	mu       sync.Mutex     // guards closing, and inflight.Add against Close's Wait
	closing  bool           // set by Close: no new forwards start
	inflight sync.WaitGroup // forwards at the site
}

// New builds a Proxy.
func New(o Options) (*Proxy, error) {
	if o.Upstream == nil || o.Upstream.Host == "" {
		return nil, errors.New("new proxy: upstream URL with a host is required")
	}
	if o.Contract == nil || o.Store == nil {
		return nil, errors.New("new proxy: contract and store are required")
	}
	p := &Proxy{store: o.Store, log: o.Logger, now: o.Now, m: newMetrics(o.Registerer), failAt: o.Failpoint}
	p.locker, _ = o.Store.(dedupe.ObjectLocker)
	if p.locker == nil {
		for _, s := range o.Contract.Senders {
			if s.Serialize != nil {
				return nil, fmt.Errorf("new proxy: sender %s serializes, and the store (%T) holds no object locks", s.Name, o.Store)
			}
		}
	}
	if p.failAt == nil {
		p.failAt = func(string) {}
	}
	p.replica = o.Replica
	if p.replica == "" {
		p.replica = dedupe.ThisReplica()
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.now == nil {
		p.now = time.Now
	}
	t := o.Transport
	if t == nil {
		t = newTransport()
	}
	client := func(r *http.Request) (string, bool) {
		c := p.contract.Load()
		// The address is judged on the headers the site gets: a trusted
		// proxy's X-Real-IP that the Connection list drops does not count.
		h := r.Header
		if len(h["Connection"]) > 0 {
			h = h.Clone()
			contract.StripHopByHop(h)
		}
		addr := c.ClientAddr(r.RemoteAddr, h)
		if !addr.IsValid() {
			return peerIP(r.RemoteAddr), false
		}
		return addr.String(), c.TrustedPeer(r.RemoteAddr)
	}
	p.pass, p.capt = newReverseProxies(o.Upstream, t, o.KeepIdle, client, func(r *http.Request, err error) {
		p.log.Warn("pass-through to the site failed", "method", r.Method, "path", r.URL.Path, "err", err)
	})
	every := o.HitFlushInterval
	if every <= 0 {
		every = time.Second
	}
	p.hits = newHitCounter(o.Store, p.log, every)
	p.traffic = newTrafficCounter(o.Store, p.log, every)
	p.abortCtx, p.abort = context.WithCancel(context.Background())
	p.SetContract(o.Contract)
	return p, nil
}

// Waiting is how many keys deliveries of this process are waiting on
// (in_progress: wait); it returns to zero when no delivery waits, whoever
// finished the keys.
func (p *Proxy) Waiting() int { return p.waiters.len() }

// SetContract swaps in new sender rules for requests that start after it.
func (p *Proxy) SetContract(c *contract.Contract) {
	// Every sender path's hookonce_unmatched_total series exist from the
	// start at 0, so a rate over them sees the first request.
	for _, rt := range c.Routes() {
		p.m.unmatched.WithLabelValues(rt.Path, UnmatchedForwarded)
		p.m.unmatched.WithLabelValues(rt.Path, UnmatchedRefused)
	}
	p.contract.Store(c)
}

// Close waits for deliveries at the site until ctx is done, then aborts the
// rest (their claims are released so the senders' retries run them), and
// writes pending hit counts. The store is not closed.
func (p *Proxy) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.inflight.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		p.abort()
		err = fmt.Errorf("close proxy: aborted deliveries still at the site: %w", ctx.Err())
		<-done // aborted forwards release their claims and return quickly
	}
	p.abort()
	p.hits.close()
	p.traffic.close()
	if o, ok := p.capt.Transport.(*oneShot); ok {
		o.closeIdle()
	}
	return err
}

// ServeHTTP implements http.Handler. It finds the route of the path the
// site will run (a sender's path in any spelling PHP and nginx accept);
// requests on paths no sender names are streamed to the site untouched.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := p.contract.Load()
	path, rt, err := c.Locate(r.URL.EscapedPath())
	if err != nil {
		// No site runs such a path, or hookonce cannot tell whether it
		// reaches a sender's script: refuse it rather than guess.
		p.m.requests.WithLabelValues("", OutcomeBadRequest).Inc()
		answerBadPath(w, err)
		return
	}
	if rt == nil {
		p.pass.ServeHTTP(w, r)
		return
	}
	d := &delivery{p: p, c: c, rt: rt, path: path, w: w, r: r, start: time.Now(), log: p.log, by: dedupe.AttemptBySender}
	if !rt.AcceptsMethod(r.Method) {
		d.unmatched(nil, "method "+r.Method+" is not accepted on this path")
		return
	}
	d.serve()
}

// takeSlot takes one of max_inflight slots for a delivery whose body has
// arrived, or answers 503 and reports false. Each held delivery may keep
// max_body and the site's answer in memory; a request still sending its
// body holds only what it sent, and no slot, so sockets that send headers
// and nothing more cannot starve the senders (they end at body_timeout).
func (d *delivery) takeSlot() bool {
	p, c := d.p, d.c
	if n := p.held.Add(1); c.MaxInflight > 0 && n > int64(c.MaxInflight) {
		p.held.Add(-1)
		d.overloaded()
		return false
	}
	p.m.inflight.Inc()
	return true
}

// overloaded answers 503 to a delivery refused past max_inflight (a slot
// or the body memory): counted with sender="" (no sender was chosen), and
// logged at most a line a second for all of them.
func (d *delivery) overloaded() {
	p := d.p
	p.m.requests.WithLabelValues("", OutcomeOverloaded).Inc()
	if n := p.refused.note(time.Now()); n > 0 {
		p.log.Warn("webhook", "sender", "", "path", d.rt.Path, "outcome", OutcomeOverloaded, "status", http.StatusServiceUnavailable,
			"max_inflight", d.c.MaxInflight, "refused", n)
	}
	answerOverloaded(d.w)
}

func (d *delivery) freeSlot() {
	d.p.held.Add(-1)
	d.p.m.inflight.Dec()
}

// errBodyBudget: the bodies being received and held already take
// max_inflight × max_body.
var errBodyBudget = errors.New("the memory for request bodies (max_inflight × max_body) is taken")

// reserve accounts n more bytes of request body against max_inflight ×
// max_body, or reports false. What a delivery reserved is given back when
// it ends (serve).
func (d *delivery) reserve(n int64) bool {
	c := d.c
	if c.MaxInflight <= 0 {
		return true
	}
	if d.p.bodyBytes.Add(n) > int64(c.MaxInflight)*c.MaxBody {
		d.p.bodyBytes.Add(-n)
		return false
	}
	d.reserved += n
	return true
}

// readBody reads a body of declared length cl (-1: chunked) up to max,
// reserving memory before allocating it: a body over 16 KiB starts with
// 16 KiB and doubles as it arrives, never past its declared length (a
// socket that sends headers and nothing more holds 16 KiB, one that
// stalls after n bytes at most about 2n, not max_body). Past max it
// returns what it read and an *http.MaxBytesError; when reserve refuses,
// errBodyBudget.
func readBody(r io.Reader, cl, max int64, reserve func(int64) bool) ([]byte, error) {
	const first = 16 << 10
	if cl > max {
		return nil, &http.MaxBytesError{Limit: max}
	}
	if cl >= 0 && cl <= first {
		if !reserve(cl) {
			return nil, errBodyBudget
		}
		body := make([]byte, cl) // small: exactly, in one allocation
		_, err := io.ReadFull(r, body)
		return body, err
	}
	limit := max + 1 // chunked: one byte past the limit tells "too large"
	if cl >= 0 {
		limit = cl
	}
	if !reserve(first) {
		return nil, errBodyBudget
	}
	body := bodyBuf(first)
	for int64(len(body)) < limit {
		if len(body) == cap(body) {
			// Doubling, for a declared length as for chunks: what a
			// delivery holds grows with what arrived, so a socket that
			// sends 16 KiB and a byte, then stalls, holds 32 KiB, not the
			// Content-Length it declared. The buffer it outgrew goes back
			// to a pool for the next body, not to the garbage.
			grow := min(int64(cap(body)), limit-int64(len(body)))
			if !reserve(grow) {
				return body, errBodyBudget
			}
			next := append(bodyBuf(len(body)+int(grow)), body...)
			freeBodyBuf(body)
			body = next
		}
		n, err := r.Read(body[len(body):min(int64(cap(body)), limit)])
		body = body[:len(body)+n]
		if err == io.EOF {
			if cl >= 0 && int64(len(body)) < cl {
				return body, io.ErrUnexpectedEOF
			}
			break
		}
		if err != nil {
			return body, err
		}
	}
	if int64(len(body)) > max {
		return body, &http.MaxBytesError{Limit: max}
	}
	return body, nil
}

// bodyPools hold the buffers a growing body outgrew, by size: 16 KiB
// shifted left by the pool's index. Only exact sizes are pooled; a body's
// last buffer (its declared length) is the delivery's and never returns.
var bodyPools [10]sync.Pool

func bodyPool(size int) *sync.Pool {
	const first = 16 << 10
	if size < first || size&(size-1) != 0 {
		return nil
	}
	i := bits.Len(uint(size/first)) - 1
	if i >= len(bodyPools) {
		return nil
	}
	return &bodyPools[i]
}

// bodyBuf returns an empty buffer of capacity size, pooled when it can be.
func bodyBuf(size int) []byte {
	if p := bodyPool(size); p != nil {
		if b, ok := p.Get().(*[]byte); ok {
			return (*b)[:0]
		}
	}
	return make([]byte, 0, size)
}

// freeBodyBuf gives back a buffer a body outgrew: nothing refers to it.
func freeBodyBuf(b []byte) {
	if p := bodyPool(cap(b)); p != nil {
		b = b[:0]
		p.Put(&b)
	}
}

// refusals counts requests refused past max_inflight for the log, which
// gets at most one line a second (the metric counts every one): a flood
// must not become a flood of log lines.
type refusals struct {
	mu      sync.Mutex
	next    time.Time // when the next line may be written
	pending int64     // refused since the last line
}

// note counts one refusal and answers how many the log line to write now
// covers, or 0 for no line.
func (r *refusals) note(now time.Time) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending++
	if now.Before(r.next) {
		return 0
	}
	n := r.pending
	r.pending, r.next = 0, now.Add(time.Second)
	return n
}

func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// storeCall runs one store operation under the sender's store_timeout.
// The sender hanging up does not cancel it.
func (p *Proxy) storeCall(r *http.Request, s *contract.Sender, op string, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.StoreTimeout)
	defer cancel()
	defer p.m.observeStore(op, time.Now())
	return fn(ctx)
}

// delivery is one request on a sender's path on its way through the
// decision table.
type delivery struct {
	p     *Proxy
	c     *contract.Contract
	rt    *contract.Route
	path  string            // normalised
	req   *contract.Request // once the body is read
	s     *contract.Sender  // once a sender accepted the request
	w     http.ResponseWriter
	r     *http.Request
	log   *slog.Logger
	start time.Time

	body     []byte
	reserved int64 // bytes of p.bodyBytes this delivery holds
	key      string
	hash     string
	// legacyHash is the payload hash an older hookonce stored for this
	// payload, when it differs from hash: claimed with once more when hash
	// conflicts, so an event stored before an upgrade stays a duplicate.
	legacyHash string
	owner      string
	takeover   bool
	unclaimed  bool // forwarded without dedupe (passthrough.go): no claim
	// claimSent is when the claim that won was sent to the store (with
	// the monotonic clock): its lease is surely ours only until
	// claimSent + lease, however late the store's reply came.
	claimSent time.Time

	object      string        // the business object (serialize); "" for none
	objectErr   error         // why a serializing sender's delivery has no object
	objectHeld  atomic.Bool   // the object is ours in the store (renewed by the heartbeat)
	objectWait  time.Duration // how long the delivery waited for it
	leaveObject func()        // leaves the local queue of the object

	upstreamStatus int
	upstreamTime   time.Duration
	by             string // dedupe.AttemptBySender, or AttemptByOperator for a redelivery
	outcome        string // the decision, once made (as counted)
	siteDown       int64  // this forward found the site unreachable: the how-manieth in a row
}

// siteDownLoud is how many forwards in a row must find the site
// unreachable before each is logged at ERROR rather than WARN.
const siteDownLoud = 3

// done counts and logs the decision: one line per delivery, never a body,
// a secret or a signature.
func (d *delivery) done(outcome string, status int, attrs ...any) {
	var args []any
	sender := ""
	if d.s != nil {
		sender = d.s.Name
		if d.s.Shadow() && shadowed[outcome] {
			outcome = "would_" + outcome
		}
	} else {
		args = append(args, "sender", "", "path", d.rt.Path) // d.log names neither yet
	}
	d.outcome = outcome
	d.p.m.requests.WithLabelValues(sender, outcome).Inc()
	if d.by == dedupe.AttemptBySender {
		d.noteTraffic(outcome, status) // for the readiness report (traffic.go)
	}
	args = append(args, "key", d.key, "outcome", outcome, "status", status,
		"duration_ms", time.Since(d.start).Milliseconds())
	if d.upstreamStatus != 0 || d.upstreamTime != 0 {
		args = append(args, "upstream_status", d.upstreamStatus, "upstream_ms", d.upstreamTime.Milliseconds())
	}
	if d.object != "" && outcome != OutcomeObjectBusy { // object_busy names it itself
		args = append(args, "scope", d.s.Serialize.Scope, "object", d.object, "object_wait_ms", d.objectWait.Milliseconds())
	}
	if d.objectErr != nil {
		args = append(args, "object_err", d.objectErr.Error())
	}
	level := slog.LevelInfo
	switch outcome {
	case OutcomeStoreError, OutcomeAmbiguous, OutcomeNotSuccess, OutcomeUnmatched, "would_" + OutcomeStoreError:
		level = slog.LevelWarn
	}
	if d.siteDown > 0 {
		// The site could not be reached: a warning, an error once it
		// happens again and again (repeats are still answered from the
		// store, so hookonce itself stays ready).
		level = slog.LevelWarn
		if d.siteDown >= siteDownLoud {
			level = slog.LevelError
		}
		args = append(args, "site_unreachable", true, "unreachable_in_a_row", d.siteDown)
	}
	d.log.Log(d.r.Context(), level, "webhook", append(args, attrs...)...)
}

// shadowed outcomes are the ones shadow mode does not act on.
var shadowed = map[string]bool{
	OutcomeDuplicate: true, OutcomeConflict: true, OutcomeInProgress: true,
	OutcomeRejectedSignature: true, OutcomeMissingKey: true, OutcomeTooLarge: true,
	OutcomeStoreError: true,
}

func (d *delivery) serve() {
	r, w := d.r, d.w
	maxBody := d.c.MaxBody
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(d.c.BodyTimeout))
	// The longest a sender on this path may be kept waiting.
	var longest time.Duration
	for _, s := range d.rt.Senders {
		longest = max(longest, s.UpstreamTimeout+s.WaitTimeout)
	}
	_ = rc.SetWriteDeadline(time.Now().Add(longest + 30*time.Second))

	// 1. Body limit: a declared length is judged before reading a byte; a
	// chunked body when it passes the limit. The body is read before a
	// sender is chosen: senders on one path may be told apart by it.
	defer func() { d.p.bodyBytes.Add(-d.reserved) }()
	body, err := readBody(r.Body, r.ContentLength, maxBody, d.reserve)
	if errors.Is(err, errBodyBudget) {
		w.Header().Set("Connection", "close") // the rest of the body is not read
		d.overloaded()
		return
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			d.choose(d.firstCandidate())
			if d.s.Shadow() {
				// Shadow never refuses: hand on what was read and the rest.
				r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
				d.done(OutcomeTooLarge, 0)
				d.p.pass.ServeHTTP(w, r)
				return
			}
			d.done(OutcomeTooLarge, http.StatusRequestEntityTooLarge)
			answerTooLarge(w, maxBody)
			return
		}
		// A body that stalls or breaks its framing is not a delivery: say
		// so, or the sender takes an empty 200 for "delivered" (trap 24).
		status := http.StatusBadRequest
		if isTimeout(err) {
			status = http.StatusRequestTimeout
		}
		d.choose(d.firstCandidate())
		d.done(OutcomeBadRequest, status, "reason", "body not read", "err", err.Error())
		answerBodyUnread(w, status)
		return
	}
	d.body = body
	if !d.takeSlot() {
		return
	}
	defer d.freeSlot()

	// Which sender (the first on this path, in file order, whose method and
	// match.when accept the request), its signature, key and hash: judged
	// by the contract, as `hookonce check --request` shows them.
	in := d.c.Inspect(d.rt, r, d.path, body, d.p.now())
	d.req = in.Request
	// 1b. A form the site would read otherwise than hookonce can: judging
	// it on a partial reading is how a bypass starts. Refused whatever
	// unmatched says; shadow mode forwards it, logged.
	if in.BodyErr != nil {
		d.choose(d.firstCandidate())
		if d.s.Shadow() {
			d.done(OutcomeBadRequest, 0, "reason", in.BodyErr.Error())
			d.forwardPlain()
			return
		}
		d.done(OutcomeBadRequest, http.StatusBadRequest, "reason", in.BodyErr.Error())
		answerUnreadable(w, in.BodyErr.Error())
		return
	}
	if in.Choice.Sender == nil {
		d.unmatched(body, strings.Join(in.Choice.Why, "; "))
		return
	}
	d.choose(in.Choice.Sender)
	d.decide(in)
}

func (d *delivery) choose(s *contract.Sender) {
	d.s = s
	d.log = d.p.log.With("sender", s.Name)
}

// firstCandidate is the sender a request is counted under before the body
// that decides between senders is read.
func (d *delivery) firstCandidate() *contract.Sender {
	for _, s := range d.rt.Senders {
		if slices.Contains(s.Methods, d.r.Method) || s.Methods == nil {
			return s
		}
	}
	return d.rt.Senders[0]
}

// unmatched answers a request on a sender's path that no sender there
// accepts (rows 0c, 0d): handed on untouched when the route forwards it
// (Route.ForwardsUnmatched: a default or written unmatched: pass, or every
// sender in shadow mode), else refused. body is nil when it was not read.
// Either way it is counted by path and logged at WARN with what it looked
// like, never a value.
func (d *delivery) unmatched(body []byte, why string) {
	req := d.req
	if req == nil {
		req = contract.NewRequest(d.r, d.path, nil, netip.Addr{})
	}
	sh := req.Shape()
	if body == nil {
		sh.Form, sh.JSON = nil, nil // not read: only the method refused it
	}
	attrs := []any{"reason", why, "unmatched", d.rt.UnmatchedReason(), "method", sh.Method, "content_type", sh.ContentType,
		"query_fields", strings.Join(sh.Query, ","), "form_fields", strings.Join(sh.Form, ","), "json_fields", strings.Join(sh.JSON, ",")}
	if d.rt.ForwardsUnmatched(d.r.Method) {
		d.p.m.unmatched.WithLabelValues(d.rt.Path, UnmatchedForwarded).Inc()
		d.done(OutcomeUnmatched, 0, append(attrs, "action", UnmatchedForwarded, "forwarded", true)...)
		if body != nil {
			d.forwardPlain()
		} else {
			d.p.pass.ServeHTTP(d.w, d.r)
		}
		return
	}
	d.p.m.unmatched.WithLabelValues(d.rt.Path, UnmatchedRefused).Inc()
	attrs = append(attrs, "action", UnmatchedRefused)
	if !d.rt.AcceptsMethod(d.r.Method) {
		d.done(OutcomeUnmatched, http.StatusMethodNotAllowed, attrs...)
		answerMethodNotAllowed(d.w, d.rt.Allowed())
		return
	}
	d.done(OutcomeUnmatched, http.StatusForbidden, attrs...)
	answerUnmatched(d.w)
}

// decide runs rows 2 and 3 of the decision table for the chosen sender,
// then the claim.
func (d *delivery) decide(in contract.Inspection) {
	s, w := d.s, d.w
	// 2. Signature: an unverified message never occupies an event id.
	if err := in.SigErr; err != nil {
		if s.Shadow() {
			d.done(OutcomeRejectedSignature, 0, "reason", err.Error())
			d.forwardPlain()
			return
		}
		d.done(OutcomeRejectedSignature, http.StatusUnauthorized, "reason", err.Error())
		answerBadSignature(w, err.Error())
		return
	}

	// 3. Forwarded without dedupe by the sender's choice (dedupe: off,
	// no_dedupe, a preset's shape no key tells apart): proxy/passthrough.go.
	if in.Passthrough != "" {
		if d.objectKey(in) {
			d.passthrough(in.Passthrough)
		}
		return
	}
	// Key and payload hash. A key no event id should hold (control
	// characters, invalid UTF-8) is refused whatever missing_key says.
	if err := in.Unkeyed(); err != nil {
		if s.Forwardable(err, in.Request) {
			if s.MissingKey == contract.MissingPass {
				if d.objectKey(in) {
					d.passthrough("missing_key: pass: " + err.Error())
				}
				return
			}
			d.done(OutcomeMissingKey, 0, "reason", err.Error())
			d.forwardPlain()
			return
		}
		d.done(OutcomeMissingKey, http.StatusBadRequest, "reason", err.Error())
		answerMissingKey(w, err.Error())
		return
	}
	d.key, d.hash, d.legacyHash = in.Key, in.Hash, in.LegacyHash
	if d.objectKey(in) {
		d.claimLoop()
	}
}

// objectKey takes the delivery's business object (serialize) from the
// inspection, for a claimed delivery and one forwarded without dedupe
// alike. serialize is never silently off: an object key that is there but
// unreadable is refused as an unreadable event key is (a copy of a
// captured delivery with the header sent twice cannot run beside its
// object's other deliveries): answered here, false. An absent one runs
// unserialized, logged (object_err) and counted. Shadow mode forwards
// either way.
func (d *delivery) objectKey(in contract.Inspection) bool {
	d.object = in.Object
	err := in.ObjectErr
	if err == nil {
		return true
	}
	d.objectErr = err
	if contract.KeyUnreadable(err) && !d.s.Shadow() {
		d.done(OutcomeBadRequest, http.StatusBadRequest, "reason", "serialize key unreadable")
		answerUnreadable(d.w, "the serialize key cannot be read as the site reads it: "+err.Error())
		return false
	}
	d.p.m.unserial.WithLabelValues(d.s.Name).Inc()
	return true
}

// claimLoop runs rows 4 to 9 of the decision table (decideClaim judges,
// this acts); a delivery waiting on another one comes back here when that
// one finishes.
func (d *delivery) claimLoop() {
	s, w := d.s, d.w
	deadline := time.Now().Add(s.WaitTimeout)
	rekeyed := false // changed_payload: new_event extends the key once
	for {
		d.owner = newOwner()
		req := dedupe.ClaimRequest{Sender: s.Name, Key: d.key, PayloadHash: d.hash, Owner: d.owner, Lease: s.Lease, TTL: s.TTL}
		if s.StoreRequestBody {
			// Kept for conflict diffs and operator redelivery: the site
			// may check the signature headers, so they are kept too.
			req.RequestBody = d.body
			req.Request = &dedupe.StoredRequest{Method: d.r.Method, URI: d.r.URL.RequestURI(), Header: d.r.Header.Clone()}
		}
		var res dedupe.ClaimResult
		d.claimSent = time.Now()
		err := d.p.storeCall(d.r, s, "claim", func(ctx context.Context) (err error) {
			res, err = d.p.store.Claim(ctx, req)
			return err
		})
		if err != nil {
			d.storeDown(err)
			return
		}
		if res.Outcome == dedupe.Conflicting && d.legacyHash != "" && res.Record.PayloadHash == d.legacyHash {
			// Stored by a hookonce whose hash did not cover the query:
			// the same payload in the old form. Claim in that form.
			d.hash, d.legacyHash = d.legacyHash, ""
			continue
		}
		// Row 7: what a changed payload means for this sender.
		var attrs []any
		if res.Outcome == dedupe.Conflicting {
			attrs = []any{"stored_sha256", res.Record.PayloadHash, "received_sha256", d.hash}
			changed := judgeChanged(s, res)
			if changed.rekey && !rekeyed {
				rekeyed = true
				d.key = contract.ChangedKey(d.key, d.hash)
				d.log.Info("changed payload under a known id: claimed as its own event",
					append(attrs, "key", d.key, "changed_payload", s.ChangedPayload)...)
				continue
			}
			if changed.res.Outcome != res.Outcome {
				attrs = append(attrs, "changed_payload", s.ChangedPayload)
			}
			res = changed.res
		}
		dec := decideClaim(s, res, time.Now().Before(deadline))
		switch res.Outcome {
		case dedupe.Held:
			attrs = []any{"state", "unknown"}
		}
		if dec.record {
			d.recordConflict(res.Record)
		}
		switch dec.act {
		case actForward:
			d.takeover = res.Outcome == dedupe.TakenOver
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
			d.storeDown(fmt.Errorf("claim %s/%s: unexpected outcome %v", s.Name, d.key, res.Outcome))
		}
		return
	}
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

// recordConflict records a delivery refused (or, in shadow mode, that
// would be refused) as a conflict with stored. With store_request_body the
// refused request is kept beside it, as a claim keeps its request (the
// headers whole: the site may check a signature when an operator accepts
// it), its body at most max_stored_body bytes; and what changed against
// the kept original: JSON paths, or form field names as PHP reads them.
// Without store_request_body nothing of the payload is kept, and the
// conflict cannot be accepted.
func (d *delivery) recordConflict(stored dedupe.Record) {
	c := dedupe.Conflict{
		Sender: d.s.Name, Key: d.key, StoredHash: stored.PayloadHash, ReceivedHash: d.hash,
		ReceivedAt: time.Now(), ExpiresAt: time.Now().Add(d.s.TTL), Shadow: d.s.Shadow(),
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
	err := d.p.storeCall(d.r, d.s, "record_conflict", func(ctx context.Context) error {
		return d.p.store.RecordConflict(ctx, c)
	})
	if err != nil {
		d.log.Warn("conflict not recorded", "key", d.key, "err", err)
	}
}

// forwardPlain hands the delivery to the site without a claim (shadow mode,
// missing_key: pass, on_store_error: forward).
//
// A delivery whose key was read (shadow mode, on_store_error: forward)
// carries the forward key header like a claimed one, so the site can pass
// a stable key on; one without a key (missing_key: pass, forwarded
// without dedupe, unmatched) goes exactly as the sender sent it.
func (d *delivery) forwardPlain() {
	r := d.r.Clone(d.r.Context())
	r.Body = io.NopCloser(bytes.NewReader(d.body))
	r.ContentLength = int64(len(d.body))
	r.GetBody = nil
	if d.s != nil && d.key != "" && d.s.ForwardKeyHeader != "" {
		// Hop-by-hop headers are gone already (Inspect), so a sender's
		// Connection list cannot strip it.
		r.Header.Set(d.s.ForwardKeyHeader, d.s.Name+":"+d.key)
	}
	d.p.pass.ServeHTTP(d.w, r)
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
	if s.ForwardKeyHeader != "" {
		// Set in Rewrite, after hop-by-hop headers are removed, so a
		// sender's "Connection: Idempotency-Key" cannot strip it.
		c.keyHeader, c.keyValue = s.ForwardKeyHeader, s.Name+":"+d.key
	}
	ctx = context.WithValue(ctx, captureKey{}, c)
	ctx = context.WithValue(ctx, beforeWriteKey{}, func() error { return d.leaseHeld(beat) })
	if s.Ambiguous == contract.AmbiguousHold {
		// This sender's operator wants every ambiguous forward held for a
		// person: none may come from a kept connection that a restarting
		// site closed under the write (trap 32).
		ctx = context.WithValue(ctx, freshConnKey{}, true)
	}
	if _, direct := p.capt.Transport.(*oneShot); !direct {
		// oneShot says how far the request got in its own error
		// (sendError); any other RoundTripper is traced.
		ctx = httptrace.WithClientTrace(ctx, c.trace())
	}

	// A shallow copy is enough: ReverseProxy clones it (headers included)
	// before Rewrite touches anything.
	out := d.r.WithContext(ctx)
	out.Body = io.NopCloser(bytes.NewReader(d.body))
	out.ContentLength = int64(len(d.body))
	out.GetBody = nil // trap 1

	p.failAt("claimed")
	if err := d.leaseHeld(beat); err != nil {
		d.leaseLost(err)
		return
	}
	began := time.Now()
	p.capt.ServeHTTP(c, out)
	d.upstreamTime = time.Since(began)
	p.failAt("answered")
	p.m.upstream.WithLabelValues(s.Name).Observe(d.upstreamTime.Seconds())
	d.upstreamStatus = c.status

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
	att := d.attempt(dec.outcome, dec.status)
	beat.settling.Store(true)
	stored := true
	switch dec.store {
	case storeComplete:
		stored = d.complete(c, beat, att)
	case storeHold:
		d.hold(att)
	case storeRelease:
		d.release(att)
	}
	var attrs []any
	switch {
	case why != "":
		attrs = []any{"reason", why}
	case err != nil:
		attrs = []any{"err", err.Error()}
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
		answerUpstreamError(d.w, dec.status, "the site could not be reached; retry later")
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
		answerUpstreamError(d.w, dec.status, what+"; the handler may have run")
	}
}

// beat is a running heartbeat: it renews the lease every lease/3 and knows
// until when the claim is surely ours.
type beat struct {
	quit  chan struct{}
	wg    sync.WaitGroup
	until atomic.Int64 // the lease's end as of the last renewal: monotonic nanos since epoch
	once  sync.Once
	// settling: the delivery is storing its outcome, which ends the claim;
	// a renewal that lands after it finds no claim, and that is no loss.
	settling atomic.Bool
}

func (b *beat) stop() { b.once.Do(func() { close(b.quit); b.wg.Wait() }) }

// epoch anchors beat.until to the monotonic clock: a paused process (a GC
// pause, a VM stall, SIGSTOP) or a wall clock stepped back cannot make a
// lease look longer than it is.
var epoch = time.Now()

// leaseEnd is when a lease of d asked for at asked ends, as beat.until.
func leaseEnd(asked time.Time, lease time.Duration) int64 { return int64(asked.Sub(epoch) + lease) }

// leaseLeft is how long the claim is ours for sure.
func (b *beat) leaseLeft() time.Duration { return time.Duration(b.until.Load()) - time.Since(epoch) }

// errLeaseLost: the delivery's lease may have run out before the site was
// called, and renewing it under the owner check failed: another delivery
// may hold the claim now, so this one must not forward.
var errLeaseLost = errors.New("the claim's lease ran out before the site was called")

// leaseHeld runs just before the request is written to the site. A claim
// whose lease may be ending (measured from when the claim or its last
// renewal was sent) is renewed under the owner check first; the delivery
// forwards only if that succeeds, so a process paused past its lease
// while a retry took the claim over never runs the handler a second time.
// What remains is the time between this check and the write (ARCHITECTURE
// trap 33).
func (d *delivery) leaseHeld(b *beat) error {
	if b.leaseLeft() > d.s.Lease/10 {
		return nil
	}
	asked := time.Now()
	err := d.p.storeCall(d.r, d.s, "renew", func(ctx context.Context) error {
		return d.p.store.Renew(ctx, d.s.Name, d.key, d.owner, d.s.Lease)
	})
	if err != nil {
		return fmt.Errorf("%w: renewing it failed: %w", errLeaseLost, err)
	}
	b.until.Store(leaseEnd(asked, d.s.Lease))
	return nil
}

// heartbeat renews the lease every lease/3 while the site works and while
// the outcome is stored (trap 6).
func (d *delivery) heartbeat() *beat {
	b := &beat{quit: make(chan struct{})}
	b.until.Store(leaseEnd(d.claimSent, d.s.Lease))
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(d.s.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-b.quit:
				return
			case <-t.C:
				asked := time.Now()
				err := d.p.storeCall(d.r, d.s, "renew", func(ctx context.Context) error {
					return d.p.store.Renew(ctx, d.s.Name, d.key, d.owner, d.s.Lease)
				})
				if err == nil && d.objectHeld.Load() {
					ser := d.s.Serialize
					oerr := d.p.storeCall(d.r, d.s, "renew_object", func(ctx context.Context) error {
						return d.p.locker.RenewObject(ctx, ser.Scope, d.object, d.owner, d.s.Lease)
					})
					if errors.Is(oerr, dedupe.ErrNotOwner) && !b.settling.Load() {
						d.log.Error("business object lost while the site works: another delivery about it may run at the same time",
							"key", d.key, "scope", ser.Scope, "object", d.object)
					}
				}
				switch {
				case err == nil:
					b.until.Store(leaseEnd(asked, d.s.Lease))
				case errors.Is(err, dedupe.ErrNotOwner):
					b.until.Store(0)
					if !b.settling.Load() {
						d.log.Error("claim lost while the site works: another delivery may run the handler too", "key", d.key)
					} // else the outcome's own write ended the claim, or reports its loss itself
					return
				default:
					d.log.Warn("lease not renewed", "key", d.key, "err", err)
				}
			}
		}
	}()
	return b
}

// complete stores the final answer (false: it is not, and a retry may run
// the handler again), retrying a store that is down for as
// long as the lease is surely ours (the heartbeat keeps renewing it), so a
// store blip of a few seconds loses no answer. Past that, a retry after
// the lease would run the handler again: logged and counted.
func (d *delivery) complete(c *capture, b *beat, att dedupe.Attempt) (stored bool) {
	resp := storable(d.s, c)
	pause := 100 * time.Millisecond
	// unconfirmed: an attempt was applied but its replicas did not
	// confirm it (Redis wait_replicas); the record then reads as stored
	// where a failover may still lose it, so reading it proves nothing.
	unconfirmed := false
	for attempt := 1; ; attempt++ {
		err := d.p.storeCall(d.r, d.s, "complete", func(ctx context.Context) error {
			return d.p.store.Complete(ctx, d.s.Name, d.key, d.owner, resp, att)
		})
		if err == nil {
			return true
		}
		unconfirmed = unconfirmed || errors.Is(err, dedupe.ErrNotConfirmed)
		if errors.Is(err, dedupe.ErrNotOwner) {
			if attempt > 1 && !unconfirmed && d.storedByUs() {
				return true // an earlier attempt committed; only its reply was lost
			}
			d.p.m.lost.WithLabelValues(d.s.Name).Inc()
			d.log.Error("answer not stored: the claim was taken over or released meanwhile", "key", d.key)
			return false
		}
		// Another try only while the claim is surely still ours.
		if b.leaseLeft() <= pause {
			// A write the store applied after its reply was lost (a frozen
			// or cut database) is not a lost answer: look before saying so.
			if !unconfirmed && d.storedByUs() {
				return true
			}
			d.p.m.lost.WithLabelValues(d.s.Name).Inc()
			d.log.Error("answer not stored before the lease ran out: a retry will run the handler again", "key", d.key, "attempts", attempt, "err", err)
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Second)
	}
}

// storedByUs tells, after a Complete whose reply was lost (trap 12), whether
// it committed: the record is done with this delivery's payload and the
// answer the site gave is there. Never retry a write blindly; re-read.
func (d *delivery) storedByUs() bool {
	var rec dedupe.Record
	err := d.p.storeCall(d.r, d.s, "get", func(ctx context.Context) (err error) {
		rec, err = d.p.store.Get(ctx, d.s.Name, d.key)
		return err
	})
	return err == nil && rec.State == dedupe.StateDone && rec.PayloadHash == d.hash &&
		rec.Response != nil && rec.Response.Status == d.upstreamStatus
}

// attempt describes this delivery's turn at the site, as the record keeps it.
func (d *delivery) attempt(outcome string, status int) dedupe.Attempt {
	return dedupe.Attempt{At: d.start, By: d.by, Outcome: outcome, Status: status,
		Duration: d.upstreamTime, Replica: d.p.replica, Wait: d.objectWait}
}

func (d *delivery) release(att dedupe.Attempt) {
	if d.unclaimed {
		return // forwarded without dedupe: there is no claim to free
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
