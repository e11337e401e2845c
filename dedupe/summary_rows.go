package dedupe

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Summaries gathers the rows of a backend's aggregate queries into
// SenderSummary values (see Summarizer). The zero value is not usable:
// make it with make(Summaries).
type Summaries map[string]*SenderSummary

// Sender is sender's summary, created empty on first use.
func (m Summaries) Sender(sender string) *SenderSummary {
	s := m[sender]
	if s == nil {
		s = &SenderSummary{Sender: sender, States: map[State]int64{}, Attempts: map[string]int64{}}
		m[sender] = s
	}
	return s
}

// SetRecords sets sender's records from one aggregate row: n records
// received in the window, how many of them are processing, done, unknown
// and released now, and the sum of their hits (Replays).
func (m Summaries) SetRecords(sender string, n, processing, done, unknown, released, hits int64) {
	s := m.Sender(sender)
	s.Records, s.Replays = n, hits
	for st, v := range map[State]int64{StateProcessing: processing, StateDone: done, StateUnknown: unknown, StateReleased: released} {
		if v > 0 {
			s.States[st] = v
		}
	}
}

// AddAttempts adds n attempts of sender with outcome; bucket is the
// LatencyBucket of their durations, or -1 for attempts that did not reach
// the site (no duration), sum and longest their durations.
func (m Summaries) AddAttempts(sender, outcome string, bucket int, n int64, sum, longest time.Duration) {
	s := m.Sender(sender)
	s.Attempts[outcome] += n
	if bucket < 0 || bucket > len(LatencyBounds) {
		return
	}
	if s.Latency.Buckets == nil {
		s.Latency.Buckets = make([]int64, len(LatencyBounds)+1)
	}
	s.Latency.Count += n
	s.Latency.Sum += sum
	s.Latency.Max = max(s.Latency.Max, longest)
	s.Latency.Buckets[bucket] += n
}

// Sorted returns the summaries by sender name, without ProbeSender's.
func (m Summaries) Sorted() []SenderSummary {
	out := make([]SenderSummary, 0, len(m))
	for name, s := range m {
		if name != ProbeSender {
			out = append(out, *s)
		}
	}
	slices.SortFunc(out, func(a, b SenderSummary) int { return strings.Compare(a.Sender, b.Sender) })
	return out
}

// LatencyBucketSQL is an SQL CASE expression giving the LatencyBucket of
// the nanosecond duration expr, -1 when expr is not positive: the same
// buckets in every SQL backend.
func LatencyBucketSQL(expr string) string {
	var b strings.Builder
	b.WriteString("CASE WHEN " + expr + " <= 0 THEN -1")
	for i, d := range LatencyBounds {
		b.WriteString(" WHEN " + expr + " <= " + strconv.FormatInt(int64(d), 10) + " THEN " + strconv.Itoa(i))
	}
	b.WriteString(" ELSE " + strconv.Itoa(len(LatencyBounds)) + " END")
	return b.String()
}
