package proxy

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
)

// trafficCounter keeps the readiness report's counters (dedupe.TrafficCount):
// each delivery's decision is added to a map in memory, and the map is
// written to the store every flush interval and on close, off the request
// path. Counters never slow or fail a delivery: a store that keeps none is
// not asked, a full map (maxTrafficPending counters) drops what does not
// fit, and a failed write is logged and its counts lost (counters are not
// records).
type trafficCounter struct {
	rec dedupe.TrafficRecorder // nil: the store keeps no counters
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex // guards pending and dropped
	pending map[trafficID]*dedupe.TrafficCount
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
	status                        int
}

func newTrafficCounter(store dedupe.Store, log *slog.Logger, every time.Duration) *trafficCounter {
	t := &trafficCounter{log: log, now: time.Now, pending: map[trafficID]*dedupe.TrafficCount{},
		stop: make(chan struct{}), done: make(chan struct{})}
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

// note counts one delivery's decision (as done counts it).
func (t *trafficCounter) note(sender, path, outcome string, status int, detail string, atSite time.Duration) {
	if t.rec == nil {
		return
	}
	day := dedupe.TrafficDay(t.now())
	id := trafficID{day: day.Unix(), sender: sender, path: path, outcome: outcome, detail: detail, status: status}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.pending[id]
	if c == nil {
		if len(t.pending) >= maxTrafficPending {
			t.dropped++
			return
		}
		c = &dedupe.TrafficCount{Day: day, Sender: sender, Path: path, Outcome: outcome, Status: status, Detail: detail}
		t.pending[id] = c
	}
	c.N++
	c.MaxMillis = max(c.MaxMillis, atSite.Milliseconds())
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
	t.pending, t.dropped = map[trafficID]*dedupe.TrafficCount{}, 0
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
// shape (requestShape), so the report can say what it looked like.
func (d *delivery) noteTraffic(outcome string, status int) {
	sender, detail := "", ""
	if d.s != nil {
		sender = d.s.Name
	}
	switch strings.TrimPrefix(outcome, "would_") {
	case OutcomeUnmatched, OutcomeMissingKey:
		detail = requestShape(d.r.Method, d.req)
	}
	d.p.traffic.note(sender, d.rt.Path, outcome, status, detail, d.upstreamTime)
}

// Bounds of a request's shape: the names kept, a name's length, and the
// largest body whose names are read.
const (
	maxShapeNames = 24
	maxShapeName  = 48
	maxShapeBody  = 64 << 10
)

// notableHeader names the headers that tell a provider apart (signatures,
// event types, webhook ids): their names go into a shape, never values.
var notableHeader = regexp.MustCompile(`(?i)sign|webhook|event|hook|hmac|token|delivery|topic`)

// requestShape describes a request by its method and the names of its
// fields (a JSON body's top-level keys, a form's or the query's top-level
// names) and of its notable headers: what an operator needs to tell which
// provider sent it. It never holds a value. req is nil when the body was
// not read.
func requestShape(method string, req *contract.Request) string {
	parts := []string{method}
	if req == nil {
		return method
	}
	if names := queryNames(req.RawQuery); len(names) > 0 {
		parts = append(parts, "query: "+joinNames(names))
	}
	if len(req.Body) > maxShapeBody {
		// Bound the work spent on a body nobody vouched for (trap 30).
		parts = append(parts, "body: "+firstWord(req.Header.Get("Content-Type"))+" (large)")
	} else if len(req.Body) > 0 {
		switch {
		case req.Body[firstNonSpace(req.Body)] == '{':
			var top map[string]json.RawMessage
			if err := json.Unmarshal(req.Body, &top); err == nil {
				names := make([]string, 0, len(top))
				for k := range top {
					names = append(names, k)
				}
				parts = append(parts, "json: "+joinNames(names))
			} else {
				parts = append(parts, "body: "+firstWord(req.Header.Get("Content-Type")))
			}
		default:
			if f, err := req.Fields(contract.FromForm); err == nil {
				names := make([]string, 0, len(f))
				for k := range f {
					k, _, _ = strings.Cut(k, "[")
					names = append(names, k)
				}
				parts = append(parts, "form: "+joinNames(names))
			} else {
				parts = append(parts, "body: "+firstWord(req.Header.Get("Content-Type")))
			}
		}
	}
	var hs []string
	for h := range req.Header {
		if notableHeader.MatchString(h) {
			hs = append(hs, h)
		}
	}
	if len(hs) > 0 {
		parts = append(parts, "headers: "+joinNames(hs))
	}
	return strings.Join(parts, "; ")
}

func firstNonSpace(b []byte) int {
	for i, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return i
		}
	}
	return 0
}

func firstWord(ct string) string {
	ct, _, _ = strings.Cut(ct, ";")
	ct = strings.TrimSpace(ct)
	if ct == "" {
		return "no content type"
	}
	return cleanName(ct)
}

func queryNames(raw string) []string {
	if raw == "" {
		return nil
	}
	var names []string
	for _, kv := range strings.Split(raw, "&") {
		k, _, _ := strings.Cut(kv, "=")
		if u, err := url.QueryUnescape(k); err == nil {
			k = u
		}
		k, _, _ = strings.Cut(k, "[")
		if k != "" {
			names = append(names, k)
		}
	}
	return names
}

// joinNames sorts, de-duplicates, bounds and cleans names.
func joinNames(names []string) string {
	for i, n := range names {
		names[i] = cleanName(n)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	more := 0
	if len(names) > maxShapeNames {
		more = len(names) - maxShapeNames
		names = names[:maxShapeNames]
	}
	s := strings.Join(names, ",")
	if more > 0 {
		s += ",…"
	}
	return s
}

// cleanName keeps a name printable and short.
func cleanName(n string) string {
	n = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == ',' || r == ';' {
			return '_'
		}
		return r
	}, n)
	if len(n) > maxShapeName {
		n = cut(n, maxShapeName) + "…"
	}
	return n
}

func cut(s string, n int) string {
	for n > 0 && n < len(s) && !isRuneStart(s[n]) {
		n--
	}
	return s[:min(n, len(s))]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
