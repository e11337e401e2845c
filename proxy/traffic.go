package proxy

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// trafficCounter keeps the readiness report's counters (dedupe.TrafficCount):
// each delivery's decision is added to a map in memory, and the map is
// written to the store every flush interval and on close, off the request
// path. Counters never slow or fail a delivery: a store that keeps none is
// not asked, a full map (maxTrafficPending counters) drops what does not
// fit, and a failed write is logged and its counts lost (counters are not
// records). As the stores do, the map keeps at most
// dedupe.MaxTrafficShapes shapes per day, sender, path and outcome, the
// rest added to the group's dedupe.TrafficOtherDetail counter: a flood of
// made-up shapes fills neither the map nor the store, and leaves room for
// the counters of genuine deliveries.
type trafficCounter struct {
	rec dedupe.TrafficRecorder // nil: the store keeps no counters
	log *slog.Logger

	mu      sync.Mutex // guards pending, shapes and dropped
	pending map[trafficID]*dedupe.TrafficCount
	shapes  map[trafficGroup]int // capped details in pending, per group
	dropped int64

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// maxTrafficPending bounds the counters held between two flushes.
const maxTrafficPending = 4096

type trafficID struct {
	day                           int64
	sender, path, outcome, detail string
	rules                         string       // the sender's rules tag (a shared string)
	from                          netip.Prefix // the source network; invalid for none
	status                        int
}

// trafficGroup is what dedupe.MaxTrafficShapes bounds the shapes of.
type trafficGroup struct {
	day                   int64
	sender, path, outcome string
}

func newTrafficCounter(store dedupe.Store, log *slog.Logger, every time.Duration) *trafficCounter {
	t := &trafficCounter{log: log, pending: map[trafficID]*dedupe.TrafficCount{},
		shapes: map[trafficGroup]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	t.rec, _ = store.(dedupe.TrafficRecorder)
	if t.rec == nil {
		close(t.done)
		return t
	}
	go func() {
		defer close(t.done)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				t.flush()
			case <-t.stop:
				t.flush()
				return
			}
		}
	}()
	return t
}

// note counts one delivery's decision (as done counts it), decided at now: the counter's
// detail is made of the rules tag, the source network and the shape
// (dedupe.TrafficDetail), as a string only when the counter is new, so
// that counting a delivery of a known counter allocates nothing.
func (t *trafficCounter) note(now time.Time, sender, path, outcome string, status int, rules string, from netip.Prefix, shape string, atSite time.Duration) {
	if t.rec == nil {
		return
	}
	id := trafficID{day: unixDay(now), sender: sender, path: path, outcome: outcome, detail: shape, rules: rules, from: from, status: status}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.pending[id]
	if c == nil && (dedupe.TrafficCapped(shape) || rules != "" || from.IsValid()) {
		g := trafficGroup{day: id.day, sender: sender, path: path, outcome: outcome}
		if t.shapes[g] >= dedupe.MaxTrafficShapes {
			id.detail, id.rules, id.from = dedupe.TrafficOtherDetail, "", netip.Prefix{}
			c = t.pending[id]
		} else if len(t.pending) < maxTrafficPending {
			t.shapes[g]++
		}
	}
	if c == nil {
		if len(t.pending) >= maxTrafficPending {
			t.dropped++
			return
		}
		detail := id.detail
		if id.detail != dedupe.TrafficOtherDetail {
			net := ""
			if id.from.IsValid() {
				net = id.from.String()
			}
			detail = dedupe.TrafficDetail(id.rules, net, id.detail)
		}
		c = &dedupe.TrafficCount{Day: time.Unix(id.day, 0).UTC(), Sender: sender, Path: path, Outcome: outcome, Status: status, Detail: detail}
		t.pending[id] = c
	}
	c.N++
	c.MaxMillis = max(c.MaxMillis, atSite.Milliseconds())
}

// unixDay is the Unix time of the UTC midnight that starts t's day,
// dedupe.TrafficDay(t).Unix() without the calendar: a UTC day is 86,400
// Unix seconds.
func unixDay(t time.Time) int64 {
	const day = 24 * 60 * 60
	s := t.Unix()
	r := s % day
	if r < 0 {
		r += day
	}
	return s - r
}

func (t *trafficCounter) flush() {
	t.mu.Lock()
	if len(t.pending) == 0 && t.dropped == 0 {
		t.mu.Unlock()
		return
	}
	batch := make([]dedupe.TrafficCount, 0, len(t.pending))
	for _, c := range t.pending {
		batch = append(batch, *c)
	}
	dropped := t.dropped
	t.pending, t.shapes, t.dropped = map[trafficID]*dedupe.TrafficCount{}, map[trafficGroup]int{}, 0
	t.mu.Unlock()
	if dropped > 0 {
		t.log.Warn("readiness counters: too many distinct counters in one flush; some deliveries were not counted", "deliveries", dropped)
	}
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.rec.AddTraffic(ctx, batch); err != nil {
		t.log.Warn("readiness counters not stored; the readiness report misses these deliveries", "counters", len(batch), "err", err)
	}
}

func (t *trafficCounter) close() {
	t.once.Do(func() { close(t.stop) })
	<-t.done
}

// noteTraffic counts the delivery's decision for the readiness report. A
// delivery that matched no sender, or had no event id, is counted with its
// shape (contract.Shape: names, never values), so the report can say what
// it looked like.
func (d *delivery) noteTraffic(outcome string, status int, now time.Time) {
	sender, shape, rules := "", "", ""
	var from netip.Prefix
	switch strings.TrimPrefix(outcome, "would_") {
	case OutcomeUnmatched, OutcomeMissingKey:
		shape = d.r.Method // the body was not read
		if d.req != nil {
			shape = d.req.Shape().String()
		}
	case OutcomeProcessed, OutcomeAccepted, OutcomeDuplicate, OutcomeRejectedSignature, OutcomeConflict:
		// Where good deliveries, bad signatures and changed payloads come
		// from: the report tells a stranger from a wrong secret, and a
		// tampering from the provider's own resend, by it.
		if d.req != nil {
			from = dedupe.SourceNetwork(d.req.Client)
		}
	}
	if d.s != nil {
		sender, rules = d.s.Name, d.p.rulesTag(d.s.Name)
	}
	d.p.traffic.note(now, sender, d.rt.Path, outcome, status, rules, from, shape, d.siteTime)
}

// rulesTag is the tag of the sender's rules in force (SetContract).
func (p *Proxy) rulesTag(sender string) string {
	if m := p.rulesTags.Load(); m != nil {
		return (*m)[sender]
	}
	return ""
}
