// The top of a request's journey: ServeHTTP finds the route, and the
// delivery (the state every later stage shares: claim.go, forward.go,
// settle.go, …) is judged here by the contract (rows 1–3) before it is
// claimed.

package proxy

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
)

// ServeHTTP implements http.Handler. It finds the route of the path the
// site will run (a sender's path in any spelling PHP and nginx accept);
// requests on paths no sender names are streamed to the site untouched.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := p.contract.Load()
	path, rt, err := c.Locate(r.URL.EscapedPath())
	if err != nil {
		// No site runs such a path, or hookonce cannot tell whether it
		// reaches a sender's script: refuse it rather than guess.
		p.m.countRequest("", OutcomeBadRequest)
		answerBadPath(w, err)
		return
	}
	if rt == nil {
		p.pass.ServeHTTP(w, r)
		return
	}
	d := &delivery{p: p, c: c, rt: rt, path: path, w: w, r: r, start: time.Now(), log: p.log, by: dedupe.AttemptBySender}
	// A method no sender accepts is answered unread (405, or forwarded),
	// unless the route forwards it and a signed sender's delivery could
	// be resent under it: then it is judged as any request is.
	if !rt.AcceptsMethod(r.Method) && !rt.JudgesUnaccepted(r.Method) {
		d.unmatched(nil, "method "+r.Method+" is not accepted on this path")
		return
	}
	d.serve()
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
	reserved int64      // bytes of p.bodyBytes this delivery holds
	peer     netip.Addr // the client address its body counts against (admission.go)
	arriving int64      // bytes of its peer's share held while the body arrives
	key      string
	hash     string
	fp       []byte // the delivery's fingerprint, once made (fingerprint.go)
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

	siteStatus int
	siteTime   time.Duration
	by         string // dedupe.AttemptBySender, or AttemptByOperator for a redelivery
	outcome    string // the decision, once made (as counted)
	siteDown   int64  // this forward found the site unreachable: the how-manieth in a row
	siteFailed int64  // the site answered this forward with a failure: the how-manieth in a row
	// pending: a try of a durable delivery (durable.go); nil otherwise.
	pending *pendingTry
	// quiet: done counts the decision but writes no line (an unmatched
	// request a recent line of its path already stands for, unmatchedLine).
	quiet bool
}

// siteDownLoud is how many forwards in a row must find the site
// unreachable (or answering with a failure) before each is logged at
// ERROR rather than WARN.
const siteDownLoud = 3

// done counts and logs the decision: one line per delivery, never a body,
// a secret or a signature.
func (d *delivery) done(outcome string, status int, attrs ...any) {
	// The line's attributes are built as slog.Attrs in an array on the
	// stack: numbers boxed into interfaces cost an allocation each.
	var buf [16]slog.Attr
	as := buf[:0]
	sender := ""
	if d.s != nil {
		sender = d.s.Name
		if d.s.Shadow() && shadowed[outcome] {
			outcome = "would_" + outcome
		}
	} else {
		as = append(as, slog.String("sender", ""), slog.String("path", d.rt.Path)) // d.log names neither yet
	}
	d.outcome = outcome
	// One clock reading for the decision: its day in the traffic
	// counters, the line's duration and the line's time.
	now := time.Now()
	d.p.m.countRequest(sender, outcome)
	if d.by == dedupe.AttemptBySender {
		d.noteTraffic(outcome, status, now) // for the readiness report (traffic.go)
	}
	d.notice(outcome) // for the operator's notices (notice.go)
	as = append(as, slog.String("key", d.key), slog.String("outcome", outcome), slog.Int("status", status),
		slog.Int64("duration_ms", now.Sub(d.start).Milliseconds()))
	if d.siteStatus != 0 || d.siteTime != 0 {
		as = append(as, slog.Int("upstream_status", d.siteStatus), slog.Int64("upstream_ms", d.siteTime.Milliseconds()))
	}
	if d.object != "" && outcome != OutcomeObjectBusy { // object_busy names it itself
		as = append(as, slog.String("scope", d.s.Serialize.Scope), slog.String("object", d.object), slog.Int64("object_wait_ms", d.objectWait.Milliseconds()))
	}
	if d.objectErr != nil {
		as = append(as, slog.String("object_err", d.objectErr.Error()))
	}
	level := slog.LevelInfo
	switch outcome {
	case OutcomeStoreError, OutcomeAmbiguous, OutcomeNotSuccess, OutcomeUnmatched, "would_" + OutcomeStoreError,
		// Refusals a sender got: a wrong secret, a changed payload, an id
		// that is not where the config says are the operator's to fix.
		OutcomeRejectedSignature, OutcomeMissingKey, OutcomeConflict, OutcomeTooLarge:
		level = slog.LevelWarn
	}
	if d.siteFailed > 0 {
		// The site answered with a failure (5xx, 408, 425, 429): the claim
		// was freed for the sender's retry, but the handler is failing.
		level = slog.LevelWarn
		if d.siteFailed >= siteDownLoud {
			level = slog.LevelError
		}
		as = append(as, slog.Bool("site_failed", true), slog.Int64("failed_in_a_row", d.siteFailed))
	}
	if d.siteDown > 0 {
		// The site could not be reached: a warning, an error once it
		// happens again and again (repeats are still answered from the
		// store, so hookonce itself stays ready).
		level = slog.LevelWarn
		if d.siteDown >= siteDownLoud {
			level = slog.LevelError
		}
		as = append(as, slog.Bool("site_unreachable", true), slog.Int64("unreachable_in_a_row", d.siteDown))
	}
	for len(attrs) > 0 { // key-value pairs or Attrs, as slog.Logger.Log takes them
		switch k := attrs[0].(type) {
		case slog.Attr:
			as, attrs = append(as, k), attrs[1:]
		case string:
			if len(attrs) == 1 {
				as, attrs = append(as, slog.String("!BADKEY", k)), nil
				continue
			}
			as, attrs = append(as, slog.Any(k, attrs[1])), attrs[2:]
		default:
			as, attrs = append(as, slog.Any("!BADKEY", k)), attrs[1:]
		}
	}
	if !d.quiet && unverifiedRefusal[strings.TrimPrefix(outcome, "would_")] {
		n := d.p.logLine(d.rt.Path, outcome)
		if n == 0 {
			d.quiet = true // counted (metrics, traffic counters, notices), not logged
		}
		as = append(as, slog.Int64("refused_since_last_line", n))
	}
	if d.quiet {
		return
	}
	// What d.log.LogAttrs does, but for the call site's program counter
	// (for a handler with AddSource), found once rather than by walking
	// the stack on every line, and the time read above.
	ctx := d.r.Context()
	h := d.log.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	rec := slog.NewRecord(now, level, "webhook", donePC())
	rec.AddAttrs(as...)
	_ = h.Handle(ctx, rec)
}

// donePCs holds the program counter of done's log call, found on its first
// line: every line comes from that one call site.
var donePCs atomic.Uintptr

// donePC is the program counter slog.Logger.LogAttrs would record for a
// line logged by done (its caller).
func donePC() uintptr {
	if pc := donePCs.Load(); pc != 0 {
		return pc
	}
	var pcs [1]uintptr
	runtime.Callers(2, pcs[:]) // skip runtime.Callers and donePC
	donePCs.Store(pcs[0])
	return pcs[0]
}

// shadowed outcomes are the ones shadow mode does not act on.
var shadowed = map[string]bool{
	OutcomeDuplicate: true, OutcomeConflict: true, OutcomeInProgress: true,
	OutcomeRejectedSignature: true, OutcomeMissingKey: true, OutcomeTooLarge: true,
	OutcomeStoreError: true, OutcomePing: true,
}

func (d *delivery) serve() {
	r, w := d.r, d.w
	maxBody := d.c.MaxBody
	rc := http.NewResponseController(w)
	// Both deadlines count from when the request came in (d.start).
	_ = rc.SetReadDeadline(d.start.Add(d.c.BodyTimeout))
	// The longest a sender on this path may be kept waiting.
	var longest time.Duration
	for _, s := range d.rt.Senders {
		longest = max(longest, s.UpstreamTimeout+s.WaitTimeout)
	}
	_ = rc.SetWriteDeadline(d.start.Add(longest + 30*time.Second))

	// 1. Body limit: a declared length is judged before reading a byte; a
	// chunked body when it passes the limit. The body is read before a
	// sender is chosen: senders on one path may be told apart by it.
	defer func() { d.p.bodyBytes.Add(-d.reserved) }()
	body, err := d.receive()
	if errors.Is(err, errBodyBudget) || errors.Is(err, errPeerBudget) {
		w.Header().Set("Connection", "close") // the rest of the body is not read
		d.overloaded(err.Error())
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
				d.dropKeyHeaders(r.Header)
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
	var now time.Time // judges signatures' timestamps: read only where a sender checks one
	if d.rt.Signed() {
		now = d.p.now()
	}
	in := d.c.Inspect(d.rt, r, d.path, body, now)
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
	// 0e. A route that cannot tell whether a sender takes the request (a
	// match.when value the site reads and hookonce cannot, or a signed
	// delivery its sender missed on an unsigned part) refuses it as 1b
	// does: "no sender" would forward it past dedupe (trap 36).
	if err := in.Choice.Undecided; err != nil {
		d.choose(d.firstCandidate())
		if d.s.Shadow() {
			d.done(OutcomeBadRequest, 0, "reason", err.Error(), "tried", strings.Join(in.Choice.Why, "; "))
			d.forwardPlain()
			return
		}
		d.done(OutcomeBadRequest, http.StatusBadRequest, "reason", err.Error(), "tried", strings.Join(in.Choice.Why, "; "))
		answerUndecided(w, err.Error())
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
	d.log = d.p.senderLog(s)
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
	var attrs []any
	if n := d.p.unmatchedLine(d.rt.Path); n == 0 {
		d.quiet = true // counted (metrics, traffic counters), not logged
	} else {
		attrs = []any{"reason", why, "unmatched", d.rt.UnmatchedReason(), "method", sh.Method, "content_type", sh.ContentType,
			"query_fields", strings.Join(sh.Query, ","), "form_fields", strings.Join(sh.Form, ","), "json_fields", strings.Join(sh.JSON, ","),
			"unmatched_since_last_line", n}
	}
	if d.rt.ForwardsUnmatched(d.r.Method) {
		d.p.m.unmatched.WithLabelValues(d.rt.Path, UnmatchedForwarded).Inc()
		d.done(OutcomeUnmatched, 0, append(attrs, "action", UnmatchedForwarded, "forwarded", true)...)
		if body != nil {
			d.forwardPlain()
		} else {
			d.dropKeyHeaders(d.r.Header)
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
	// 2a. A preset's unsigned ping (WooCommerce's, when a webhook is
	// saved) only wants a 200: answered here, never forwarded, so its
	// shape gets nothing unsigned to the site.
	if in.Ping != "" {
		if s.Shadow() {
			d.done(OutcomePing, 0, "reason", in.Ping)
			d.forwardPlain()
			return
		}
		d.done(OutcomePing, http.StatusOK, "reason", in.Ping)
		w.WriteHeader(http.StatusOK)
		return
	}
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
