package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/sqlite"
)

// The batch in memory keeps at most dedupe.MaxTrafficShapes shapes per
// group between two flushes, as the stores do: a flood of made-up shapes
// takes MaxTrafficShapes+1 of its maxTrafficPending counters, never all
// of them, so a genuine delivery's counter still fits and nothing is
// dropped; the flush writes every delivery.
func TestTrafficBatchFoldsShapes(t *testing.T) {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hookonce.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tc := newTrafficCounter(s, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour)
	const flood = 2 * maxTrafficPending
	for i := range flood {
		tc.note(time.Now(), "", "/p", OutcomeUnmatched, 0, "", netip.Prefix{}, fmt.Sprintf("POST; form: junk%d", i), 0)
	}
	tc.note(time.Now(), "shop", "/p", OutcomeProcessed, 200, "", netip.Prefix{}, "", time.Millisecond)
	tc.mu.Lock()
	pending, dropped := len(tc.pending), tc.dropped
	tc.mu.Unlock()
	if pending != dedupe.MaxTrafficShapes+2 || dropped != 0 {
		t.Fatalf("%d counters pending, %d deliveries dropped; want %d and none", pending, dropped, dedupe.MaxTrafficShapes+2)
	}
	tc.close() // flushes
	cs, err := s.Traffic(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var n, other int64
	processed := false
	for _, c := range cs {
		n += c.N
		if c.Detail == dedupe.TrafficOtherDetail {
			other = c.N
		}
		processed = processed || c.Sender == "shop"
	}
	if n != flood+1 || other != flood-dedupe.MaxTrafficShapes || !processed {
		t.Fatalf("stored %d deliveries (%d under other shapes, shop counted: %v), want %d (%d)", n, other, processed, flood+1, flood-dedupe.MaxTrafficShapes)
	}
}

// unixDay is dedupe.TrafficDay without the calendar, for any instant and
// zone: the counter's day and the TrafficCount's Day are the ones
// TrafficDay gives.
func TestUnixDayIsTrafficDay(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("MSK", 3*3600), time.FixedZone("HST", -10*3600)}
	base := time.Date(2026, 12, 3, 23, 59, 59, 999_999_999, time.UTC)
	instants := []time.Time{base, base.Add(time.Nanosecond), time.Unix(0, 0), time.Unix(-1, 0), time.Unix(86399, 0),
		time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC), time.Date(1969, 12, 31, 0, 0, 1, 0, time.UTC), time.Now()}
	for i := range 1000 {
		instants = append(instants, base.Add(time.Duration(i)*37*time.Minute+time.Duration(i)*time.Millisecond))
	}
	for _, at := range instants {
		for _, z := range zones {
			in := at.In(z)
			want := dedupe.TrafficDay(in)
			got := unixDay(in)
			if got != want.Unix() {
				t.Fatalf("unixDay(%v) = %d, want %d (%v)", in, got, want.Unix(), want)
			}
			if day := time.Unix(got, 0).UTC(); day != want {
				t.Fatalf("day of %v = %#v, want %#v", in, day, want)
			}
		}
	}
}
