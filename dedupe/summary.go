package dedupe

import (
	"context"
	"errors"
	"math"
	"time"
)

// Summarizer is implemented by stores that can aggregate what they keep
// per sender, for the admin overview page: one aggregate read over the
// records received (and the conflicts recorded) since a time, no new write
// path. SQLite and PostgreSQL implement it; Redis does not (a summary
// there would read every record hash of the window: see the README), and
// the cache decorator passes it on, answering ErrNoSummary when the
// wrapped store has none.
type Summarizer interface {
	// Summary aggregates, per sender, the records received at or after
	// since (the zero time: every kept record), their attempts made at or
	// after since, and the conflicts received at or after since. Senders
	// come sorted by name; a sender with nothing in the window is absent.
	// ProbeSender's records are never counted.
	Summary(ctx context.Context, since time.Time) ([]SenderSummary, error)
}

// ErrNoSummary: the store keeps no summary (it is no Summarizer).
var ErrNoSummary = errors.New("store keeps no summary")

// SenderSummary is what a store knows of one sender's deliveries in a
// window (see Summarizer).
type SenderSummary struct {
	Sender string
	// Records received in the window, and of them how many are in each
	// state now.
	Records int64
	States  map[State]int64
	// Replays is the sum of those records' hits: deliveries answered from
	// a stored record (counted on the record, whenever the replay came).
	Replays int64
	// Conflicts are the conflicts received in the window.
	Conflicts int64
	// Attempts counts the attempts (deliveries to the site, and an
	// operator's releases) made in the window, by Attempt.Outcome.
	Attempts map[string]int64
	// Latency is the time at the site of those attempts that reached it
	// (Duration > 0).
	Latency Latency
}

// LatencyBounds are the upper bounds of Latency.Buckets, the same as those
// of hookonce_upstream_duration_seconds; the last bucket has none (+Inf).
var LatencyBounds = []time.Duration{
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second,
	2500 * time.Millisecond, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute,
}

// Latency summarises the durations of attempts: how many, their sum and
// maximum, and how many fell in each bucket of LatencyBounds (one more
// bucket than bounds: the last counts those above the last bound). Not
// cumulative.
type Latency struct {
	Count   int64
	Sum     time.Duration
	Max     time.Duration
	Buckets []int64
}

// LatencyBucket is the index in Latency.Buckets that d falls in.
func LatencyBucket(d time.Duration) int {
	for i, b := range LatencyBounds {
		if d <= b {
			return i
		}
	}
	return len(LatencyBounds)
}

// Mean is Sum/Count, 0 without observations.
func (l Latency) Mean() time.Duration {
	if l.Count == 0 {
		return 0
	}
	return l.Sum / time.Duration(l.Count)
}

// Quantile estimates the q-quantile (0 < q ≤ 1) from the buckets, by
// linear interpolation within the bucket it falls in, as Prometheus's
// histogram_quantile does; never above Max. 0 without observations.
func (l Latency) Quantile(q float64) time.Duration {
	if l.Count == 0 || len(l.Buckets) == 0 {
		return 0
	}
	rank := q * float64(l.Count)
	var seen float64
	for i, n := range l.Buckets {
		if n == 0 {
			continue
		}
		if seen+float64(n) >= rank {
			lo := time.Duration(0)
			if i > 0 {
				lo = LatencyBounds[i-1]
			}
			hi := l.Max
			if i < len(LatencyBounds) {
				hi = min(LatencyBounds[i], l.Max)
			}
			if hi < lo {
				return hi
			}
			frac := (rank - seen) / float64(n)
			return lo + time.Duration(math.Round(frac*float64(hi-lo)))
		}
		seen += float64(n)
	}
	return l.Max
}
