package admin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/hookonce/hookonce/dedupe"
)

// The overview page (/ui/overview): per sender, deliveries by outcome in a
// window of the store's records (the last 24 h, or every kept record) and
// since this process started (its own metrics, read from Options.Gatherer
// by name: admin never imports proxy), unretried events now, and the
// site's latency, as server-rendered SVG bars (no script: the page's CSP
// is unchanged).
//
// The window comes from the store's dedupe.Summarizer (an aggregate read,
// no write path of its own); a store without one (Redis) shows the
// since-start columns only. Refusals (signature, missing key, too large,
// unreadable) are never stored: they are counted in metrics only.

// The metrics the page reads, as the proxy registers them
// (proxy/metrics.go; admin's tests check the names against a real proxy).
const (
	metricRequests     = "hookonce_requests_total"
	metricSiteDuration = "hookonce_upstream_duration_seconds"
	// metricSiteDurationMax is the longest of them: the histogram keeps none.
	metricSiteDurationMax = "hookonce_upstream_duration_max_seconds"
	metricUnmatched       = "hookonce_unmatched_total"
	// The durable deliveries owed to the site (ack: durable senders only).
	metricPending       = "hookonce_pending_deliveries"
	metricOldestPending = "hookonce_oldest_pending_seconds"
)

// Categories are the page's rows: the outcomes of hookonce_requests_total
// (and of stored attempts) grouped as an operator reads them.
var categories = []struct{ Name, Label string }{
	{"processed", "processed"},
	{"duplicate", "duplicate replayed"},
	{"conflict", "conflict"},
	{"not_success", "not success"},
	{"released", "released"},
	{"object_busy", "object busy"},
	{"refused", "refused"},
	{"other", "other"},
}

// category is the row an outcome label is counted in.
func category(outcome string) string {
	switch outcome {
	case "processed", "duplicate", "conflict", "not_success", "released", "object_busy":
		return outcome
	case "rejected_signature", "missing_key", "too_large", "bad_request":
		return "refused"
	}
	return "other" // in_progress, ambiguous, takeover, store_error, passthrough, ping, unmatched, overloaded, shadow's would_*,
	// and ack: durable's accepted and backlog_full (what is owed is shown apart: the pending gauges)
}

// OverviewWindows are the windows ?window= takes; the first is the default.
var overviewWindows = []struct {
	Name, Label string
	Span        time.Duration // 0: every kept record
}{
	{"24h", "last 24 h", 24 * time.Hour},
	{"all", "all kept records", 0},
}

type overviewPage struct {
	Title   string
	Window  string // the window's name
	Label   string // the window's label
	Windows []struct{ Name, Label string }
	// NoSummary: the store keeps no summary (Redis); only metrics are shown.
	NoSummary    bool
	HasUnretried bool
	Senders      []senderOverview
	Took         string // how long the store's summary took
	// Unmatched are the requests on a sender's path that no sender there
	// took, since start, by path (hookonce_unmatched_total).
	Unmatched []unmatchedRow
}

// unmatchedRow is one sender path's requests that no sender took.
type unmatchedRow struct {
	Path               string
	Forwarded, Refused int64
}

type senderOverview struct {
	Sender    string
	Label     string // Sender, or "(no sender)" for requests no sender took
	Rows      []overviewRow
	Records   int64 // records received in the window
	States    []stateCount
	Unretried int64
	// Owed: the durable deliveries owed to the site now, from the
	// pending gauges; nil for a sender without them (not ack: durable).
	Owed *owedView
	// Window and Started are the site's latency in the window (the
	// store's attempts) and since start (the metrics' histogram).
	Window, Started latencyView
	Chart           chart
}

// owedView is a durable sender's owed deliveries and its oldest's age.
type owedView struct {
	Sender string
	N      int64
	Oldest string // the oldest's age ("" when none owed)
	Old    bool   // the oldest waited longer than the alert's hour
}

type overviewRow struct {
	Name, Label string
	Window      int64 // -1: not known to the store (refusals) or no summary
	Started     int64 // -1: no metrics
}

type stateCount struct {
	State dedupe.State
	N     int64
}

type latencyView struct {
	Count               int64
	Mean, P50, P95, Max string
	Bars                []latencyBar
}

type latencyBar struct {
	X, Y, W, H int
	Title      string
}

// chart is one sender's SVG: a pair of bars per category, the window's
// over the since-start one, scaled to the sender's largest count.
type chart struct {
	Width, Height int
	Bars          []chartBar
}

type chartBar struct {
	Y, W   int
	Class  string
	Label  string // category label, on the first bar of a pair
	Text   string // the count
	TextX  int
	LabelY int
}

const (
	chartLabelW = 140
	chartBarW   = 300
	chartRowH   = 26
)

func (h *Handler) uiOverview(w http.ResponseWriter, r *http.Request) {
	win := overviewWindows[0]
	for _, ow := range overviewWindows {
		if ow.Name == r.URL.Query().Get("window") {
			win = ow
		}
	}
	p := overviewPage{Title: "Overview", Window: win.Name, Label: win.Label, HasUnretried: h.o.Unretried != nil}
	for _, ow := range overviewWindows {
		p.Windows = append(p.Windows, struct{ Name, Label string }{ow.Name, ow.Label})
	}
	ctx, cancel := h.storeCtx(r)
	defer cancel()

	by := map[string]*senderOverview{}
	get := func(sender string) *senderOverview {
		s := by[sender]
		if s == nil {
			s = &senderOverview{Sender: sender, Label: sender}
			if sender == "" {
				s.Label = "(no sender)"
			}
			for _, c := range categories {
				s.Rows = append(s.Rows, overviewRow{Name: c.Name, Label: c.Label, Window: -1, Started: 0})
			}
			by[sender] = s
		}
		return s
	}

	// The store's window.
	sums, took, err := h.summary(ctx, win.Span)
	switch {
	case errors.Is(err, dedupe.ErrNoSummary):
		p.NoSummary = true
	case err != nil:
		h.uiStoreError(w, "summary", err)
		return
	}
	p.Took = took.Round(time.Millisecond).String()
	for _, x := range sums {
		s := get(x.Sender)
		s.Records = x.Records
		for _, st := range []dedupe.State{dedupe.StateDone, dedupe.StateProcessing, dedupe.StateReleased, dedupe.StateUnknown} {
			if n := x.States[st]; n > 0 {
				s.States = append(s.States, stateCount{st, n})
			}
		}
		counts := map[string]int64{"duplicate": x.Replays, "conflict": x.Conflicts}
		for outcome, n := range x.Attempts {
			counts[category(outcome)] += n
		}
		s.Window = latencyOf(x.Latency, true)
		for i := range s.Rows {
			if s.Rows[i].Name != "refused" {
				s.Rows[i].Window = counts[s.Rows[i].Name]
			}
		}
	}

	// This process's metrics.
	if err := h.startedCounts(get, &p.Unmatched); err != nil {
		h.log.Warn("admin: metrics not read for the overview", "err", err)
	}

	// Unretried events now.
	if h.o.Unretried != nil {
		recs, err := h.o.Unretried(ctx, "")
		if err != nil {
			h.uiStoreError(w, "unretried", err)
			return
		}
		for _, rec := range recs {
			get(rec.Sender).Unretried++
		}
	}

	for _, name := range slices.Sorted(maps.Keys(by)) {
		s := by[name]
		s.Chart = chartOf(s.Rows)
		p.Senders = append(p.Senders, *s)
	}
	h.render(w, http.StatusOK, "overview.html", p)
}

// summary asks the store for the window ending now (span 0: everything).
func (h *Handler) summary(ctx context.Context, span time.Duration) ([]dedupe.SenderSummary, time.Duration, error) {
	sm, ok := h.o.Store.(dedupe.Summarizer)
	if !ok {
		return nil, 0, dedupe.ErrNoSummary
	}
	since := time.Time{}
	if span > 0 {
		since = h.o.Now().Add(-span)
	}
	start := time.Now()
	out, err := sm.Summary(ctx, since)
	return out, time.Since(start), err
}

// startedCounts adds hookonce_requests_total and the upstream histogram of
// the Gatherer to the senders' since-start columns.
func (h *Handler) startedCounts(get func(string) *senderOverview, unmatched *[]unmatchedRow) error {
	mfs, err := h.o.Gatherer.Gather()
	if err != nil {
		return err
	}
	byPath := map[string]*unmatchedRow{}
	// The histogram and its maximum are separate families: joined by
	// sender once both are read.
	hists := map[string]*dto.Histogram{}
	longest := map[string]time.Duration{}
	for _, mf := range mfs {
		switch mf.GetName() {
		case metricUnmatched:
			for _, m := range mf.GetMetric() {
				n := int64(math.Round(m.GetCounter().GetValue()))
				path := labelOf(m, "path")
				row := byPath[path]
				if row == nil {
					row = &unmatchedRow{Path: path}
					byPath[path] = row
				}
				if labelOf(m, "action") == "forwarded" {
					row.Forwarded += n
				} else {
					row.Refused += n
				}
			}
		case metricRequests:
			for _, m := range mf.GetMetric() {
				n := int64(math.Round(m.GetCounter().GetValue()))
				if n == 0 {
					continue
				}
				if labelOf(m, "sender") == "" && labelOf(m, "outcome") == "unmatched" {
					continue // shown by path, from hookonce_unmatched_total
				}
				s := get(labelOf(m, "sender"))
				cat := category(labelOf(m, "outcome"))
				for i := range s.Rows {
					if s.Rows[i].Name == cat {
						s.Rows[i].Started += n
					}
				}
			}
		case metricSiteDuration:
			for _, m := range mf.GetMetric() {
				if hg := m.GetHistogram(); hg.GetSampleCount() > 0 {
					hists[labelOf(m, "sender")] = hg
				}
			}
		case metricPending, metricOldestPending:
			for _, m := range mf.GetMetric() {
				s := get(labelOf(m, "sender"))
				if s.Owed == nil {
					s.Owed = &owedView{Sender: s.Sender}
				}
				v := m.GetGauge().GetValue()
				if mf.GetName() == metricPending {
					s.Owed.N = int64(math.Round(v))
				} else if v > 0 {
					age := time.Duration(v * float64(time.Second))
					s.Owed.Oldest, s.Owed.Old = Age(time.Now(), time.Now().Add(-age)), age > time.Hour
				}
			}
		case metricSiteDurationMax:
			for _, m := range mf.GetMetric() {
				longest[labelOf(m, "sender")] = time.Duration(math.Round(m.GetGauge().GetValue() * float64(time.Second)))
			}
		}
	}
	for sender, hg := range hists {
		l := fromHistogram(hg)
		d, exact := longest[sender]
		if exact {
			l.Max = d
		}
		get(sender).Started = latencyOf(l, exact)
	}
	for _, path := range slices.Sorted(maps.Keys(byPath)) {
		if row := byPath[path]; row.Forwarded+row.Refused > 0 {
			*unmatched = append(*unmatched, *row)
		}
	}
	return nil
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// fromHistogram reads a Prometheus histogram with dedupe.LatencyBounds as
// a Latency; its Max is the upper bound of the highest bucket used (the
// histogram keeps no maximum): the caller replaces it with the exact one
// (metricSiteDurationMax) when it has it, or the percentiles reach the
// bucket's bound, above every observation in it.
func fromHistogram(hg *dto.Histogram) dedupe.Latency {
	l := dedupe.Latency{Count: int64(hg.GetSampleCount()), Sum: time.Duration(hg.GetSampleSum() * float64(time.Second)),
		Buckets: make([]int64, len(dedupe.LatencyBounds)+1)}
	var prev uint64
	for _, b := range hg.GetBucket() {
		d := time.Duration(b.GetUpperBound() * float64(time.Second))
		n := int64(b.GetCumulativeCount() - prev)
		prev = b.GetCumulativeCount()
		if n > 0 {
			l.Buckets[dedupe.LatencyBucket(d)] += n
			l.Max = max(l.Max, d)
		}
	}
	if rest := l.Count - int64(prev); rest > 0 {
		l.Buckets[len(dedupe.LatencyBounds)] += rest
		l.Max = max(l.Max, l.Sum) // above the last bound: at most the sum
	}
	return l
}

func latencyOf(l dedupe.Latency, exactMax bool) latencyView {
	v := latencyView{Count: l.Count}
	if l.Count == 0 {
		return v
	}
	v.Mean, v.P50, v.P95 = dur(l.Mean()), dur(l.Quantile(.5)), dur(l.Quantile(.95))
	if exactMax {
		v.Max = dur(l.Max)
	}
	// A bar per bucket, 14 px wide, scaled to the fullest bucket.
	var top int64
	for _, n := range l.Buckets {
		top = max(top, n)
	}
	for i, n := range l.Buckets {
		hgt := 0
		if n > 0 {
			hgt = max(1, int(40*n/top))
		}
		up := "+Inf"
		if i < len(dedupe.LatencyBounds) {
			up = "≤ " + dedupe.LatencyBounds[i].String()
		}
		v.Bars = append(v.Bars, latencyBar{X: i * 16, Y: 40 - hgt, W: 14, H: hgt, Title: fmt.Sprintf("%s: %d", up, n)})
	}
	return v
}

func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

func chartOf(rows []overviewRow) chart {
	var top int64 = 1
	for _, r := range rows {
		top = max(top, r.Window, r.Started)
	}
	c := chart{Width: chartLabelW + chartBarW + 70, Height: len(rows) * chartRowH}
	scale := func(n int64) int {
		if n <= 0 {
			return 0
		}
		return max(1, int(int64(chartBarW)*n/top))
	}
	for i, r := range rows {
		y := i * chartRowH
		win, start := strings.TrimSpace(fmt.Sprint(r.Window)), fmt.Sprint(r.Started)
		if r.Window < 0 {
			win = "–"
		}
		c.Bars = append(c.Bars,
			chartBar{Y: y + 2, W: scale(r.Window), Class: "bar-window bar-" + r.Name, Label: r.Label, Text: win, LabelY: y + 16},
			chartBar{Y: y + 13, W: scale(r.Started), Class: "bar-started bar-" + r.Name, Text: start})
	}
	for i := range c.Bars {
		c.Bars[i].TextX = chartLabelW + c.Bars[i].W + 4
	}
	return c
}
