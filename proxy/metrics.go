package proxy

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes, as counted in hookonce_requests_total and logged per decision.
// In shadow mode the refusing ones are reported with a "would_" prefix.
const (
	OutcomeProcessed         = "processed"
	OutcomeDuplicate         = "duplicate"
	OutcomeConflict          = "conflict"
	OutcomeInProgress        = "in_progress"
	OutcomeReleased          = "released"
	OutcomeAmbiguous         = "ambiguous"
	OutcomeRejectedSignature = "rejected_signature"
	OutcomeMissingKey        = "missing_key"
	OutcomeTooLarge          = "too_large"
	OutcomeStoreError        = "store_error"
	OutcomePassthrough       = "passthrough"
	OutcomeTakeover          = "takeover"
	// OutcomeNotSuccess: the site answered a final status that the
	// sender's success rule does not accept; the claim was freed.
	OutcomeNotSuccess = "not_success"
	// OutcomeUnmatched: a request on a sender's path that no sender there
	// accepts (counted with sender="").
	OutcomeUnmatched = "unmatched"
	// OutcomeBadRequest: a path or body that could not be read.
	OutcomeBadRequest = "bad_request"
	// OutcomeOverloaded: max_inflight requests were already being handled
	// (counted with sender="").
	OutcomeOverloaded = "overloaded"
	// OutcomeObjectBusy: the delivery's business object (serialize) stayed
	// busy past serialize.wait, or too many deliveries waited on it; the
	// claim was freed and nothing stored.
	OutcomeObjectBusy = "object_busy"
	// OutcomePing: one of the preset's unsigned test requests
	// (WooCommerce's ping when a webhook is saved), answered 200 by
	// hookonce and never forwarded.
	OutcomePing = "ping"
)

type metrics struct {
	requests *prometheus.CounterVec
	siteTime *prometheus.HistogramVec
	// siteTimeMax is the longest time at the site since start, by sender:
	// the histogram keeps no maximum, and the overview's percentiles are
	// capped at it (an estimate from the buckets alone reaches the
	// bucket's bound, above every delivery in it).
	siteTimeMax *prometheus.GaugeVec
	maxMu       sync.Mutex
	maxSeen     map[string]time.Duration // guarded by maxMu
	store       *prometheus.HistogramVec
	inflight    prometheus.Gauge
	notStored   *prometheus.CounterVec
	unretried   *prometheus.GaugeVec
	objWait     *prometheus.HistogramVec
	objBusy     *prometheus.GaugeVec
	unmatched   *prometheus.CounterVec
	unserial    *prometheus.CounterVec
	// pending and oldestPending: durable deliveries owed to the site.
	pending       *prometheus.GaugeVec
	oldestPending *prometheus.GaugeVec

	// Children of requests and store found once (countRequest,
	// observeStore): a label lookup hashes its values on every call.
	requestsBy children[requestLabels, prometheus.Counter]
	storeBy    children[string, prometheus.Observer]
}

// requestLabels are the labels of one hookonce_requests_total series.
type requestLabels struct{ sender, outcome string }

// countRequest adds one delivery decided as outcome to
// hookonce_requests_total.
func (m *metrics) countRequest(sender, outcome string) {
	m.requestsBy.get(requestLabels{sender, outcome}, func() prometheus.Counter {
		return m.requests.WithLabelValues(sender, outcome)
	}).Inc()
}

// children are the series of a metric vector by their labels, each found
// in the vector once: read without a lock (a map never changed once
// published), added under mu by copying. Their labels come from the
// config and the code (sender names, outcomes, store operations), never
// from a request, and no series of them is ever deleted from its vector,
// so a child found once counts for good.
type children[K comparable, V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[K]V]
}

func (c *children[K, V]) get(k K, find func() V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
	}
	next := make(map[K]V, 1)
	if old != nil {
		next = maps.Clone(*old)
	}
	v := find()
	next[k] = v
	c.m.Store(&next)
	return v
}

// Actions of hookonce_unmatched_total: what became of a request on a
// sender's path that no sender there took.
const (
	UnmatchedForwarded = "forwarded"
	UnmatchedRefused   = "refused"
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookonce_requests_total",
			Help: "Webhook deliveries by sender and decision outcome.",
		}, []string{"sender", "outcome"}),
		siteTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookonce_upstream_duration_seconds",
			Help:    "Time the site took to answer a forwarded webhook delivery.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"sender"}),
		siteTimeMax: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookonce_upstream_duration_max_seconds",
			Help: "The longest time the site took to answer a forwarded webhook delivery since this process started.",
		}, []string{"sender"}),
		maxSeen: map[string]time.Duration{},
		store: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookonce_store_duration_seconds",
			Help:    "Duration of store calls by operation.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"op"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookonce_inflight",
			Help: "Webhook deliveries currently being handled.",
		}),
		notStored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookonce_answers_not_stored_total",
			Help: "Site answers that could not be stored (store down past the lease, or the claim taken over): a retry runs the handler again.",
		}, []string{"sender"}),
		unretried: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookonce_unretried_events",
			Help: "Events left released or held with no attempt within their sender's retry window: the sender gave up; an operator must redeliver or release them.",
		}, []string{"sender"}),
		objWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookonce_object_wait_seconds",
			Help:    "Time a delivery waited for its business object (serialize) before it ran, or gave up.",
			Buckets: []float64{.001, .005, .025, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"sender"}),
		objBusy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookonce_objects_busy",
			Help: "Business objects (serialize) this instance holds for a delivery at the site, by scope.",
		}, []string{"scope"}),
		unmatched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookonce_unmatched_total",
			Help: "Requests on a sender's path that no sender there took, by the path as configured and what became of them (forwarded untouched to the site, or refused).",
		}, []string{"path", "action"}),
		unserial: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookonce_unserialized_total",
			Help: "Deliveries of a serializing sender that ran without their object's lock: the serialize key was absent (or, in shadow mode, unreadable).",
		}, []string{"sender"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookonce_pending_deliveries",
			Help: "Deliveries of ack: durable senders that hookonce answered and still owes the site.",
		}, []string{"sender"}),
		oldestPending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookonce_oldest_pending_seconds",
			Help: "Age of the oldest delivery hookonce still owes the site, by sender (0 when none).",
		}, []string{"sender"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.siteTime, m.siteTimeMax, m.store, m.inflight, m.notStored, m.unretried, m.objWait, m.objBusy, m.unmatched, m.unserial,
			m.pending, m.oldestPending)
	}
	return m
}

// showOwed sets sender's owed durable deliveries; with none, the oldest
// owed one's age is 0 too.
func (m *metrics) showOwed(sender string, n int64) {
	m.pending.WithLabelValues(sender).Set(float64(n))
	if n == 0 {
		m.oldestPending.WithLabelValues(sender).Set(0)
	}
}

// observeSite records the time the site took for one of sender's
// deliveries.
func (m *metrics) observeSite(sender string, d time.Duration) {
	m.siteTime.WithLabelValues(sender).Observe(d.Seconds())
	m.maxMu.Lock()
	defer m.maxMu.Unlock()
	if d > m.maxSeen[sender] {
		m.maxSeen[sender] = d
		m.siteTimeMax.WithLabelValues(sender).Set(d.Seconds())
	}
}

func (m *metrics) observeStore(op string, start time.Time) {
	m.storeBy.get(op, func() prometheus.Observer { return m.store.WithLabelValues(op) }).Observe(time.Since(start).Seconds())
}
