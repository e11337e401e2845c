// Package proxy is hookonce's http.Handler: it routes each request to its
// sender's rules, runs the decision table (docs/decision-table.md) against the store,
// forwards deliveries to the site, and answers the sender.
//
// Requests that match no sender are streamed to the site untouched. The
// package never imports a store backend: it talks to dedupe.Store only.
package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy/internal/oneshot"
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
	// Notice, when set, hears of the decisions an operator acts on
	// (notice.go). It is called on the delivery path: it must not wait.
	Notice func(Notice)
	// DurableBackoff is when failed tries of durable deliveries are
	// tried again (nil: DefaultDurableBackoff); DurablePoll how often
	// RunDurable looks for due ones (0: 1s). Tests shorten them.
	DurableBackoff []time.Duration
	DurablePoll    time.Duration
}

// Proxy is the sidecar's request handler.
type Proxy struct {
	contract atomic.Pointer[contract.Contract]
	// rulesTags are the senders' RulesTag in force, by name: the
	// traffic counters carry them (traffic.go).
	rulesTags atomic.Pointer[map[string]string]
	// fpKey is the install's fingerprint key (fingerprint.go); nil until
	// the store gave it.
	fpKey    atomic.Pointer[[]byte]
	store    dedupe.Store
	memory   memoryDuplicates // store, when it answers repeats from memory (dedupe/cache); else nil
	log      *slog.Logger
	logs     sync.Map // sender name → senderLogger: each sender's logger, built once (senderLog)
	m        *metrics
	now      func() time.Time
	pass     *httputil.ReverseProxy
	capt     *siteCall
	hits     *hitCounter
	traffic  *trafficCounter // the readiness report's counters (traffic.go)
	failAt   func(point string)
	onNotice func(Notice) // Options.Notice
	replica  string
	waiters  waiters
	objects  objectQueues        // local queues of deliveries per business object (serialize)
	locker   dedupe.ObjectLocker // the store's object locks; nil when it has none
	slots    atomic.Int64        // max_inflight slots taken: deliveries whose body is in, being handled
	siteDown atomic.Int64        // forwards in a row that found the site unreachable
	siteFail atomic.Int64        // answers in a row that were failures (row 10: 5xx, 408, 425, 429)
	durable  *durable            // owed deliveries of ack: durable senders (durable.go)

	// confirmedGet reads a record only once the store confirms it is
	// durable (dedupe.ConfirmedReader; Get when the store has none).
	confirmedGet func(ctx context.Context, sender, key string) (dedupe.Record, error)
	// confirmsReads: confirmedGet is the store's own confirmed read, good
	// even after a write its replicas did not confirm.
	confirmsReads bool

	// bodyBytes is the request body memory reserved by deliveries being
	// received or handled, bounded by max_inflight × max_body.
	bodyBytes atomic.Int64
	refused   refusals // refusals past max_inflight, for the log
	// unmatchedLog throttles the lines of requests no sender took: a
	// *lineBudget per route path and outcome (logLine).
	unmatchedLog sync.Map
	peers        peerBytes // body bytes per client address still arriving

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
	p := &Proxy{store: o.Store, log: o.Logger, now: o.Now, m: newMetrics(o.Registerer), failAt: o.Failpoint, onNotice: o.Notice}
	p.locker, _ = o.Store.(dedupe.ObjectLocker)
	p.memory, _ = o.Store.(memoryDuplicates)
	p.confirmedGet = o.Store.Get
	if cr, ok := o.Store.(dedupe.ConfirmedReader); ok {
		p.confirmedGet, p.confirmsReads = cr.GetConfirmed, true
	}
	p.durable = newDurable(o.Store, o.DurableBackoff, o.DurablePoll)
	p.durable.show = p.m.showOwed
	if p.durable.store == nil {
		for _, s := range o.Contract.Senders {
			if s.Ack == contract.AckDurable {
				return nil, fmt.Errorf("new proxy: sender %s has ack: durable, and the store (%T) keeps no durable deliveries", s.Name, o.Store)
			}
		}
	}
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
	p.pass, p.capt = newForwards(o.Upstream, t, o.KeepIdle, client, func(r *http.Request, err error) {
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
	p.loadFingerprintKey()
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
	tags := make(map[string]string, len(c.Senders))
	for _, s := range c.Senders {
		tags[s.Name] = s.RulesTag()
	}
	p.rulesTags.Store(&tags)
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
	if o, ok := p.capt.rt.(*oneshot.Transport); ok {
		o.CloseIdle()
	}
	return err
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

// memoryDuplicates is a store that answers from memory, with no store
// call, the repeats of done records its Claim would answer from memory
// (dedupe/cache's Store).
type memoryDuplicates interface {
	Duplicate(sender, key, payloadHash string) (dedupe.Record, bool)
}

// senderLogger is a sender's logger, with the sender it was built for: a
// reload brings new senders, and a name's logger is built again for them.
type senderLogger struct {
	s   *contract.Sender
	log *slog.Logger
}

// senderLog is p.log with the sender's name, built once per sender rather
// than once per delivery.
func (p *Proxy) senderLog(s *contract.Sender) *slog.Logger {
	if v, ok := p.logs.Load(s.Name); ok && v.(senderLogger).s == s {
		return v.(senderLogger).log
	}
	l := p.log.With("sender", s.Name)
	p.logs.Store(s.Name, senderLogger{s: s, log: l})
	return l
}
