package dedupetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// RunTrafficConformance checks a store's traffic counters
// (dedupe.TrafficRecorder and dedupe.TrafficReader): counts of one counter
// add up across calls and concurrent writers, the longest time at the site
// is the largest written, labels are kept as given (cut to their bounds),
// the day filter holds, days past dedupe.TrafficKeep are not kept, and
// openRO (nil to skip) reads them read-only and refuses to write them;
// TrafficTotals answers what the counters sum to over their days; and
// RunTrafficShapesBounded.
// Stores may share a database with other tests: only this test's senders
// are looked at.
func RunTrafficConformance(t *testing.T, newStore NewStore, openRO OpenReadOnly) {
	s := newStore(t)
	w, ok := s.(dedupe.TrafficRecorder)
	if !ok {
		t.Fatalf("%T is no dedupe.TrafficRecorder", s)
	}
	r, ok := s.(dedupe.TrafficReader)
	if !ok {
		t.Fatalf("%T is no dedupe.TrafficReader", s)
	}
	ctx := ctxT(t)
	tag := owner()
	a, b := "ta-"+tag, "tb-"+tag
	today := dedupe.TrafficDay(time.Now())
	yesterday := today.AddDate(0, 0, -1)
	old := today.Add(-dedupe.TrafficKeep - 48*time.Hour)
	const path = "/bitrix/tools/sale_ps_result.php"
	shape := "form: InvId,OutSum,SignatureValue,Shp_é"

	first := []dedupe.TrafficCount{
		{Day: today.Add(5 * time.Hour), Sender: a, Path: path, Outcome: "processed", Status: 200, N: 3, MaxMillis: 40},
		{Day: today, Sender: a, Path: path, Outcome: "would_duplicate", N: 2},
		{Day: yesterday, Sender: a, Path: path, Outcome: "processed", Status: 200, N: 5, MaxMillis: 900},
		{Day: today, Sender: "", Path: path + "-" + tag, Outcome: "unmatched", Status: 403, Detail: shape, N: 1},
		{Day: old, Sender: b, Path: path, Outcome: "processed", Status: 200, N: 9},
		{Day: today, Sender: b, Path: strings.Repeat("p", 2*dedupe.MaxTrafficPath), Outcome: "missing_key", Status: 400,
			Detail: strings.Repeat("x", 3*dedupe.MaxTrafficDetail), N: 1},
	}
	if err := w.AddTraffic(ctx, first); err != nil {
		t.Fatalf("AddTraffic: %v", err)
	}
	// Concurrent writers (replicas) add to the same counters.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- w.AddTraffic(ctx, []dedupe.TrafficCount{
				{Day: today, Sender: a, Path: path, Outcome: "processed", Status: 200, N: 1, MaxMillis: int64(10 * i)},
				{Day: today, Sender: "", Path: path + "-" + tag, Outcome: "unmatched", Status: 403, Detail: shape, N: 2},
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent AddTraffic: %v", err)
		}
	}

	mine := func(cs []dedupe.TrafficCount) map[string]dedupe.TrafficCount {
		out := map[string]dedupe.TrafficCount{}
		for _, c := range cs {
			if c.Sender != a && c.Sender != b && c.Path != path+"-"+tag {
				continue
			}
			k := fmt.Sprintf("%s|%s|%s|%s|%d|%s", c.Day.Format("2006-01-02"), c.Sender, c.Path, c.Outcome, c.Status, c.Detail)
			if _, dup := out[k]; dup {
				t.Errorf("counter %s answered twice", k)
			}
			out[k] = c
		}
		return out
	}
	check := func(name string, r dedupe.TrafficReader, since time.Time, want map[string][2]int64) {
		t.Helper()
		got, err := r.Traffic(ctxT(t), since)
		if err != nil {
			t.Fatalf("%s: Traffic: %v", name, err)
		}
		for i := 1; i < len(got); i++ {
			if dedupe.TrafficLess(got[i-1], got[i]) > 0 {
				t.Fatalf("%s: Traffic is not sorted: %+v before %+v", name, got[i-1], got[i])
			}
		}
		m := mine(got)
		for k, c := range m {
			if !c.Day.Equal(dedupe.TrafficDay(c.Day)) || c.Day.Location() != time.UTC {
				t.Errorf("%s: counter %s has day %v, want a UTC midnight", name, k, c.Day)
			}
			wv, ok := want[k]
			if !ok {
				t.Errorf("%s: unexpected counter %s = %d", name, k, c.N)
				continue
			}
			if c.N != wv[0] || c.MaxMillis != wv[1] {
				t.Errorf("%s: counter %s = n %d, max %d ms; want n %d, max %d ms", name, k, c.N, c.MaxMillis, wv[0], wv[1])
			}
		}
		for k := range want {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: counter %s missing", name, k)
			}
		}
	}
	d := func(day time.Time) string { return day.Format("2006-01-02") }
	longPath, longDetail := strings.Repeat("p", dedupe.MaxTrafficPath), strings.Repeat("x", dedupe.MaxTrafficDetail)
	all := map[string][2]int64{
		d(today) + "|" + a + "|" + path + "|processed|200|":                    {3 + 8, 70},
		d(today) + "|" + a + "|" + path + "|would_duplicate|0|":                {2, 0},
		d(yesterday) + "|" + a + "|" + path + "|processed|200|":                {5, 900},
		d(today) + "||" + path + "-" + tag + "|unmatched|403|" + shape:         {1 + 16, 0},
		d(today) + "|" + b + "|" + longPath + "|missing_key|400|" + longDetail: {1, 0},
	}
	check("every day", r, time.Time{}, all)
	onlyToday := map[string][2]int64{}
	for k, v := range all {
		if strings.HasPrefix(k, d(today)) {
			onlyToday[k] = v
		}
	}
	check("since today", r, today.Add(3*time.Hour), onlyToday)

	// The store sums the counters over their days: TrafficTotals answers
	// what Traffic's counters add up to, one row per counter.
	checkTotals := func(name string, r dedupe.TrafficReader, since time.Time) {
		t.Helper()
		cs, err := r.Traffic(ctxT(t), since)
		if err != nil {
			t.Fatalf("%s: Traffic: %v", name, err)
		}
		ts, err := r.TrafficTotals(ctxT(t), since)
		if err != nil {
			t.Fatalf("%s: TrafficTotals: %v", name, err)
		}
		for i := 1; i < len(ts); i++ {
			if dedupe.TrafficTotalLess(ts[i-1], ts[i]) >= 0 {
				t.Fatalf("%s: TrafficTotals is not sorted or answers a counter twice: %+v before %+v", name, ts[i-1], ts[i])
			}
		}
		isMine := func(sender, p string) bool { return sender == a || sender == b || p == path+"-"+tag }
		var want []dedupe.TrafficTotal
		for _, w := range dedupe.SumTraffic(cs) {
			if isMine(w.Sender, w.Path) {
				want = append(want, w)
			}
		}
		var got []dedupe.TrafficTotal
		for _, g := range ts {
			if isMine(g.Sender, g.Path) {
				got = append(got, g)
			}
		}
		if len(want) == 0 {
			t.Fatalf("%s: no counters of this test", name)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: TrafficTotals = %d counters, want %d:\n%+v\nwant %+v", name, len(got), len(want), got, want)
		}
		for i := range want {
			g, w := got[i], want[i]
			if !g.First.Equal(w.First) || !g.Last.Equal(w.Last) || g.First.Location() != time.UTC || g.Last.Location() != time.UTC {
				g.First, g.Last = g.First.UTC(), g.Last.UTC()
				t.Errorf("%s: total %+v, want days %v to %v (UTC)", name, g, w.First, w.Last)
				continue
			}
			g.First, g.Last = w.First, w.Last
			if g != w {
				t.Errorf("%s: total %+v, want %+v", name, g, w)
			}
		}
	}
	checkTotals("totals of every day", r, time.Time{})
	checkTotals("totals since today", r, today.Add(3*time.Hour))

	t.Run("shapes bounded", func(t *testing.T) { RunTrafficShapesBounded(t, newStore) })

	t.Run("read-only", func(t *testing.T) {
		if openRO == nil {
			t.Skip("no read-only handle for this store")
		}
		ro := openRO(t)
		t.Cleanup(func() { ro.Close() })
		rr, ok := ro.(dedupe.TrafficReader)
		if !ok {
			t.Fatalf("read-only %T is no dedupe.TrafficReader", ro)
		}
		check("read-only", rr, time.Time{}, all)
		checkTotals("read-only totals", rr, time.Time{})
		rw, ok := ro.(dedupe.TrafficRecorder)
		if !ok {
			t.Fatalf("read-only %T is no dedupe.TrafficRecorder", ro)
		}
		if err := rw.AddTraffic(ctxT(t), first); !errors.Is(err, dedupe.ErrReadOnly) {
			t.Fatalf("read-only AddTraffic: %v, want ErrReadOnly", err)
		}
		check("after a refused write", r, time.Time{}, all)
	})
}

// RunTrafficShapesBounded checks that a store keeps at most
// dedupe.MaxTrafficShapes shapes per day, sender, path and outcome,
// however they come (many new shapes in one batch, replicas writing new
// shapes at once, shapes already kept written again after the bound is
// reached): a flood of distinct shapes leaves at most MaxTrafficShapes+1
// counters in the group (the last one dedupe.TrafficOtherDetail), no
// delivery is lost (the counters and TrafficTotals sum to what was
// written), a kept shape still counts on its own, and other groups keep
// their own bound.
func RunTrafficShapesBounded(t *testing.T, newStore NewStore) {
	s := newStore(t)
	w := s.(dedupe.TrafficRecorder)
	r := s.(dedupe.TrafficReader)
	ctx := ctxT(t)
	tag := owner()
	today := dedupe.TrafficDay(time.Now())
	flooded, other := "/flood-"+tag, "/quiet-"+tag
	const K = dedupe.MaxTrafficShapes
	shape := func(i int) string { return fmt.Sprintf("POST; form: f%d-%s", i, tag) }
	count := func(p, detail string, n int64) dedupe.TrafficCount {
		return dedupe.TrafficCount{Day: today, Path: p, Outcome: "unmatched", Status: 403, Detail: detail, N: n}
	}

	// The first shape, kept before the flood.
	if err := w.AddTraffic(ctx, []dedupe.TrafficCount{count(flooded, shape(0), 5)}); err != nil {
		t.Fatalf("AddTraffic: %v", err)
	}
	total := int64(5)
	// One batch with more new shapes than the bound.
	var big []dedupe.TrafficCount
	for i := 1; i <= 2*K; i++ {
		big = append(big, count(flooded, shape(i), 1))
	}
	if err := w.AddTraffic(ctx, big); err != nil {
		t.Fatalf("AddTraffic of %d new shapes: %v", len(big), err)
	}
	total += int64(2 * K)
	// The first shape again, once the group is full: it still counts on
	// its own.
	if err := w.AddTraffic(ctx, []dedupe.TrafficCount{count(flooded, shape(0), 8), count(flooded, shape(99999), 1)}); err != nil {
		t.Fatalf("AddTraffic: %v", err)
	}
	total += 9
	// Replicas writing new shapes of one fresh group at once, each batch
	// under the bound, together four times over it.
	raced := "/race-" + tag
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var batch []dedupe.TrafficCount
			for i := range K / 2 {
				batch = append(batch, count(raced, shape(10000+g*K+i), 2))
			}
			errs <- w.AddTraffic(ctx, batch)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent AddTraffic: %v", err)
		}
	}
	const racedTotal = 8 * K / 2 * 2
	// Another path's group keeps its own shapes.
	if err := w.AddTraffic(ctx, []dedupe.TrafficCount{count(other, shape(1), 1), count(other, "", 3)}); err != nil {
		t.Fatalf("AddTraffic: %v", err)
	}

	cs, err := r.Traffic(ctx, today)
	if err != nil {
		t.Fatalf("Traffic: %v", err)
	}
	var rows, shapes, racedRows int
	var sum, otherN, firstN, racedSum int64
	for _, c := range cs {
		switch c.Path {
		case raced:
			racedRows++
			racedSum += c.N
		case flooded:
			rows++
			sum += c.N
			switch c.Detail {
			case dedupe.TrafficOtherDetail:
				otherN = c.N
			case shape(0):
				firstN = c.N
				shapes++
			default:
				shapes++
			}
		case other:
			if c.Detail == dedupe.TrafficOtherDetail {
				t.Errorf("the quiet path's shape was folded: %+v", c)
			}
		}
	}
	if rows > K+1 || shapes != K {
		t.Errorf("the flooded group has %d counters (%d shapes); want at most %d: %d shapes and %q", rows, shapes, K+1, K, dedupe.TrafficOtherDetail)
	}
	if racedRows > K+1 || racedSum != racedTotal {
		t.Errorf("after concurrent writers, the group has %d counters summing to %d; want at most %d summing to %d", racedRows, racedSum, K+1, racedTotal)
	}
	if sum != total {
		t.Errorf("the flooded group's counters sum to %d deliveries, want %d", sum, total)
	}
	if firstN != 5+8 {
		t.Errorf("the shape kept before the flood counts %d, want %d", firstN, 5+8)
	}
	if otherN == 0 {
		t.Errorf("no %q counter after %d shapes", dedupe.TrafficOtherDetail, 2+2*K)
	}
	ts, err := r.TrafficTotals(ctx, today)
	if err != nil {
		t.Fatalf("TrafficTotals: %v", err)
	}
	var trows int
	var tsum int64
	for _, c := range ts {
		if c.Path == flooded {
			trows++
			tsum += c.N
		}
	}
	if trows != rows || tsum != total {
		t.Errorf("TrafficTotals: the flooded group has %d counters summing to %d, want %d summing to %d", trows, tsum, rows, total)
	}
}
