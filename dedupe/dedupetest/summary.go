package dedupetest

import (
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// RunSummaryConformance checks a dedupe.Summarizer: records by state,
// replays, conflicts, attempts by outcome and their latency buckets, per
// sender and within the window. newStore's stores may share one database
// with other tests: only this test's senders are looked at.
func RunSummaryConformance(t *testing.T, newStore NewStore) {
	s := newStore(t)
	sum, ok := s.(dedupe.Summarizer)
	if !ok {
		t.Fatalf("%T is no dedupe.Summarizer", s)
	}
	ctx := ctxT(t)
	tag := owner() // unique sender names
	a, b := "sa-"+tag, "sb-"+tag
	now := time.Now()
	attempt := func(outcome string, d time.Duration, at time.Time) dedupe.Attempt {
		return dedupe.Attempt{At: at, By: dedupe.AttemptBySender, Outcome: outcome, Status: 200, Duration: d, Replica: "r"}
	}

	o := owner()
	mustClaim(t, s, req(a, "k1", "h", o), dedupe.Claimed)
	if err := s.Complete(ctx, a, "k1", o, sampleResponse(), attempt("processed", 20*time.Millisecond, now)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddHits(ctx, []dedupe.Hit{{Sender: a, Key: "k1", N: 3}}); err != nil {
		t.Fatal(err)
	}
	o = owner()
	mustClaim(t, s, req(a, "k2", "h", o), dedupe.Claimed)
	if err := s.Release(ctx, a, "k2", o, attempt("not_success", 30*time.Millisecond, now)); err != nil {
		t.Fatal(err)
	}
	o = owner()
	mustClaim(t, s, req(a, "k3", "h", o), dedupe.Claimed)
	if err := s.Hold(ctx, a, "k3", o, attempt("ambiguous", 2*time.Second, now)); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, req(a, "k4", "h", owner()), dedupe.Claimed)
	// An attempt dated two days back: outside a window of the last hour.
	o = owner()
	mustClaim(t, s, req(a, "k5", "h", o), dedupe.Claimed)
	if err := s.Release(ctx, a, "k5", o, attempt("released", 0, now.Add(-48*time.Hour))); err != nil {
		t.Fatal(err)
	}
	o = owner()
	mustClaim(t, s, req(b, "j1", "h", o), dedupe.Claimed)
	if err := s.Complete(ctx, b, "j1", o, sampleResponse(), attempt("processed", 7*time.Millisecond, now)); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordConflict(ctx, dedupe.Conflict{Sender: b, Key: "j1", StoredHash: "h", ReceivedHash: "x",
		ReceivedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Probe(ctx); err != nil {
		t.Fatalf("Probe: %v", err)
	}

	get := func(since time.Time) map[string]dedupe.SenderSummary {
		t.Helper()
		all, err := sum.Summary(ctx, since)
		if err != nil {
			t.Fatalf("Summary(%v): %v", since, err)
		}
		out := map[string]dedupe.SenderSummary{}
		for i, x := range all {
			if x.Sender == dedupe.ProbeSender {
				t.Errorf("the probe's sender is summarised: %+v", x)
			}
			if i > 0 && all[i-1].Sender >= x.Sender {
				t.Errorf("senders not sorted: %q before %q", all[i-1].Sender, x.Sender)
			}
			if x.Sender == a || x.Sender == b {
				out[x.Sender] = x
			}
		}
		return out
	}

	check := func(name string, since time.Time, releasedAttempts int64) {
		t.Run(name, func(t *testing.T) {
			got := get(since)
			ga, gb := got[a], got[b]
			if ga.Records != 5 || ga.Replays != 3 || ga.Conflicts != 0 {
				t.Errorf("%s: records %d replays %d conflicts %d, want 5 3 0", a, ga.Records, ga.Replays, ga.Conflicts)
			}
			wantStates := map[dedupe.State]int64{dedupe.StateDone: 1, dedupe.StateReleased: 2, dedupe.StateUnknown: 1, dedupe.StateProcessing: 1}
			for st, n := range wantStates {
				if ga.States[st] != n {
					t.Errorf("%s: %d %s, want %d (%v)", a, ga.States[st], st, n, ga.States)
				}
			}
			wantAttempts := map[string]int64{"processed": 1, "not_success": 1, "ambiguous": 1, "released": releasedAttempts}
			for out, n := range wantAttempts {
				if ga.Attempts[out] != n {
					t.Errorf("%s: %d attempts %s, want %d (%v)", a, ga.Attempts[out], out, n, ga.Attempts)
				}
			}
			l := ga.Latency
			if l.Count != 3 || l.Max != 2*time.Second || l.Sum != 2050*time.Millisecond {
				t.Errorf("%s latency: count %d max %v sum %v, want 3 2s 2.05s", a, l.Count, l.Max, l.Sum)
			}
			want := make([]int64, len(dedupe.LatencyBounds)+1)
			for _, d := range []time.Duration{20 * time.Millisecond, 30 * time.Millisecond, 2 * time.Second} {
				want[dedupe.LatencyBucket(d)]++
			}
			if len(l.Buckets) != len(want) {
				t.Fatalf("%s buckets %v, want %v", a, l.Buckets, want)
			}
			for i := range want {
				if l.Buckets[i] != want[i] {
					t.Errorf("%s buckets %v, want %v", a, l.Buckets, want)
					break
				}
			}
			if gb.Records != 1 || gb.Conflicts != 1 || gb.Attempts["processed"] != 1 || gb.Latency.Count != 1 || gb.Latency.Max != 7*time.Millisecond {
				t.Errorf("%s: %+v, want 1 record, 1 conflict, 1 processed attempt of 7ms", b, gb)
			}
		})
	}
	check("every kept record", time.Time{}, 1)
	check("the last hour", now.Add(-time.Hour), 0)

	t.Run("a window after everything is empty", func(t *testing.T) {
		if got := get(time.Now().Add(time.Hour)); len(got) != 0 {
			t.Errorf("summary of the next hour: %+v", got)
		}
	})
}
