package dedupe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Traffic counters: per day, per sender and path, how many deliveries came
// to each outcome. They exist for the readiness report (dedupe/readiness):
// the refusals that write no record (a bad signature, a missing key, a
// request no sender takes) and the repeats shadow mode only logs leave no
// trace in the records, so they are counted here. Counters are not
// records: a delivery never waits for them, and a lost batch loses counts,
// never an event.

// TrafficKeep is how long a store keeps traffic counters: a day's counters
// older than this are removed by the next write (SQLite, PostgreSQL) or
// expire (Redis).
const TrafficKeep = 35 * 24 * time.Hour

// Bounds of a counter's labels; longer values are cut (TrafficCount.Clean).
const (
	MaxTrafficPath   = 256
	MaxTrafficDetail = 512
)

// MaxTrafficShapes bounds the details (request shapes) a store keeps per
// day, sender, path and outcome. A shape is made of names the client
// picks (the method and field names of a request no sender took, or of
// one without an event id), so a stranger could otherwise make one
// counter per request and fill the store for TrafficKeep. The store
// enforces it in its write, so replicas writing at once cannot exceed
// it: a counter whose detail is not yet kept, once MaxTrafficShapes
// details of its day, sender, path and outcome are, is added to the
// counter of the same labels with TrafficOtherDetail instead. 64 is far
// more than the shapes one provider sends on one path (a handful), and
// little enough that the report reads a few thousand counters at most.
// Senders, paths (as the config writes them) and outcomes come from the
// config and the code, never from the request, so they need no bound of
// their own; statuses are an HTTP status (Clean keeps 0-999).
const MaxTrafficShapes = 64

// TrafficOtherDetail is the detail of the counter that holds the
// deliveries whose shape did not fit MaxTrafficShapes. No shape reads so
// (a shape starts with the method, a token without spaces or brackets).
const TrafficOtherDetail = "(other shapes)"

// TrafficCapped reports whether detail counts against MaxTrafficShapes:
// every detail but "" and TrafficOtherDetail.
func TrafficCapped(detail string) bool { return detail != "" && detail != TrafficOtherDetail }

// TrafficCount is one counter: N deliveries on Day (UTC midnight) of
// Sender ("" when no sender took them) on Path, answered with Outcome (as
// hookonce_requests_total counts it, "would_" prefix of shadow mode
// included) and Status (the answer's status; 0 when the site's answer was
// not judged, as for a shadow forward). Detail tells the deliveries of one
// outcome apart where that helps the operator: for one that matched no
// sender or had no event id, the request's shape (field names, never
// values); "" otherwise. MaxMillis is the longest time at the site among
// them (0 when none reached it).
type TrafficCount struct {
	Day       time.Time
	Sender    string
	Path      string
	Outcome   string
	Status    int
	Detail    string
	N         int64
	MaxMillis int64
}

// TrafficRecorder is implemented by stores that keep traffic counters
// (every backend; a decorator passes it on). AddTraffic adds counts to the
// counters of the same Day, Sender, Path, Outcome, Status and Detail (N
// summed, MaxMillis the larger), and may remove days older than
// TrafficKeep. It is called off the request path, in batches.
type TrafficRecorder interface {
	AddTraffic(ctx context.Context, counts []TrafficCount) error
}

// TrafficReader reads the counters of the days at or after since's day
// (the zero time: every day kept). Traffic answers one TrafficCount per
// counter and day, sorted by TrafficLess. TrafficTotals answers them
// summed over the days, one TrafficTotal per sender, path, outcome,
// status and detail, sorted by TrafficTotalLess: the store aggregates
// (GROUP BY), so a reader (the readiness report, its per-minute gauge)
// holds at most one row per counter, never one per counter and day.
type TrafficReader interface {
	Traffic(ctx context.Context, since time.Time) ([]TrafficCount, error)
	TrafficTotals(ctx context.Context, since time.Time) ([]TrafficTotal, error)
}

// TrafficTotal is one counter summed over the days of a window: N
// deliveries from day First to day Last (UTC midnights), MaxMillis the
// longest time at the site among them.
type TrafficTotal struct {
	First, Last time.Time
	Sender      string
	Path        string
	Outcome     string
	Status      int
	Detail      string
	N           int64
	MaxMillis   int64
}

// TrafficTotalLess orders totals by sender, path, outcome, status and
// detail.
func TrafficTotalLess(a, b TrafficTotal) int {
	return TrafficLess(TrafficCount{Sender: a.Sender, Path: a.Path, Outcome: a.Outcome, Status: a.Status, Detail: a.Detail},
		TrafficCount{Sender: b.Sender, Path: b.Path, Outcome: b.Outcome, Status: b.Status, Detail: b.Detail})
}

// SumTraffic sums counters over their days: TrafficTotals for a store
// that reads a bounded set of counters (Redis: one bounded hash per day)
// and sums them in memory.
func SumTraffic(counts []TrafficCount) []TrafficTotal {
	type id struct {
		sender, path, outcome, detail string
		status                        int
	}
	at := map[id]int{}
	var out []TrafficTotal
	for _, c := range counts {
		k := id{c.Sender, c.Path, c.Outcome, c.Detail, c.Status}
		if i, ok := at[k]; ok {
			t := &out[i]
			t.N += c.N
			t.MaxMillis = max(t.MaxMillis, c.MaxMillis)
			if c.Day.Before(t.First) {
				t.First = c.Day
			}
			if c.Day.After(t.Last) {
				t.Last = c.Day
			}
			continue
		}
		at[k] = len(out)
		out = append(out, TrafficTotal{First: c.Day, Last: c.Day, Sender: c.Sender, Path: c.Path, Outcome: c.Outcome,
			Status: c.Status, Detail: c.Detail, N: c.N, MaxMillis: c.MaxMillis})
	}
	slices.SortFunc(out, TrafficTotalLess)
	return out
}

// ErrNoTraffic: the store keeps no traffic counters.
var ErrNoTraffic = errors.New("store keeps no traffic counters")

// TrafficDay is t's day in UTC, as counters are kept.
func TrafficDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// Clean is c with its day made a UTC day and its labels cut to their
// bounds (at a rune boundary), as every store keeps it.
func (c TrafficCount) Clean() TrafficCount {
	c.Day = TrafficDay(c.Day)
	c.Path = cut(c.Path, MaxTrafficPath)
	c.Detail = cut(c.Detail, MaxTrafficDetail)
	c.Sender = cut(c.Sender, MaxTrafficPath)
	c.Outcome = cut(c.Outcome, 64)
	if c.Status < 0 || c.Status > 999 {
		c.Status = 0
	}
	return c
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// TrafficLess orders counters by day, sender, path, outcome, status and
// detail: the order Traffic answers in, and the order writers lock rows in.
func TrafficLess(a, b TrafficCount) int {
	if c := a.Day.Compare(b.Day); c != 0 {
		return c
	}
	for _, p := range [][2]string{{a.Sender, b.Sender}, {a.Path, b.Path}, {a.Outcome, b.Outcome}} {
		if c := strings.Compare(p[0], p[1]); c != 0 {
			return c
		}
	}
	if a.Status != b.Status {
		return a.Status - b.Status
	}
	return strings.Compare(a.Detail, b.Detail)
}

// MergeTraffic cleans counts and sums those of one counter, sorted by
// TrafficLess: what a store writes in one go.
func MergeTraffic(counts []TrafficCount) []TrafficCount {
	type id struct {
		day                           int64
		sender, path, outcome, detail string
		status                        int
	}
	at := map[id]int{}
	var out []TrafficCount
	for _, c := range counts {
		c = c.Clean()
		k := id{c.Day.Unix(), c.Sender, c.Path, c.Outcome, c.Detail, c.Status}
		if i, ok := at[k]; ok {
			out[i].N += c.N
			out[i].MaxMillis = max(out[i].MaxMillis, c.MaxMillis)
			continue
		}
		at[k] = len(out)
		out = append(out, c)
	}
	slices.SortFunc(out, TrafficLess)
	return out
}

// Traffic passes the call on to the Reader when it is a TrafficReader
// (reading counters writes nothing); ErrNoTraffic otherwise.
func (r readOnly) Traffic(ctx context.Context, since time.Time) ([]TrafficCount, error) {
	if t, ok := r.Reader.(TrafficReader); ok {
		return t.Traffic(ctx, since)
	}
	return nil, fmt.Errorf("traffic: %w", ErrNoTraffic)
}

// TrafficTotals passes the call on as Traffic does.
func (r readOnly) TrafficTotals(ctx context.Context, since time.Time) ([]TrafficTotal, error) {
	if t, ok := r.Reader.(TrafficReader); ok {
		return t.TrafficTotals(ctx, since)
	}
	return nil, fmt.Errorf("traffic: %w", ErrNoTraffic)
}

// AddTraffic refuses, as every write of a read-only store does.
func (readOnly) AddTraffic(context.Context, []TrafficCount) error { return refuse("add traffic") }

// A sender's counter carries in its Detail what the report tells its
// deliveries apart by: the tag of the sender's rules when they were
// counted (contract's RulesTag), so the report counts from the last
// change of the rules; for a bad signature and a good delivery, the
// source address's network (an IPv4 /24, an IPv6 /48), so the report
// tells a stranger from a wrong secret; and, for a delivery without an
// event id, its shape. Detail is bounded like every shape
// (MaxTrafficShapes per group, the rest TrafficOtherDetail): a stranger
// who picks addresses fills the "other" counter, never the store.

// TrafficDetail composes a sender counter's detail from the rules tag,
// the source network and the shape, each "" when none.
func TrafficDetail(rules, from, shape string) string {
	d := ""
	if rules != "" {
		d = "r=" + rules
	}
	if from != "" {
		if d != "" {
			d += " "
		}
		d += "from=" + from
	}
	if shape != "" {
		if d != "" {
			d += " "
		}
		d += shape
	}
	return d
}

// ParseTrafficDetail splits a sender counter's detail as TrafficDetail
// composed it. A detail of an older hookonce (a shape alone) has no
// rules tag nor source.
func ParseTrafficDetail(d string) (rules, from, shape string) {
	if r, ok := strings.CutPrefix(d, "r="); ok {
		rules, d, _ = strings.Cut(r, " ")
	}
	if f, ok := strings.CutPrefix(d, "from="); ok {
		from, d, _ = strings.Cut(f, " ")
	}
	return rules, from, d
}

// SourceNetwork is the network an address is counted under: its /24 for
// IPv4, its /48 for IPv6 (a provider's senders share one; one host's
// addresses do); invalid when the address is unknown.
func SourceNetwork(a netip.Addr) netip.Prefix {
	if !a.IsValid() {
		return netip.Prefix{}
	}
	a = a.Unmap()
	bits := 24
	if a.Is6() {
		bits = 48
	}
	p, _ := a.Prefix(bits)
	return p
}
