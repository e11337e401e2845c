package dedupe

import (
	"context"
	"errors"
	"fmt"
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
// (the zero time: every day kept), one TrafficCount per counter, sorted by
// TrafficLess.
type TrafficReader interface {
	Traffic(ctx context.Context, since time.Time) ([]TrafficCount, error)
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

// AddTraffic refuses, as every write of a read-only store does.
func (readOnly) AddTraffic(context.Context, []TrafficCount) error { return refuse("add traffic") }
