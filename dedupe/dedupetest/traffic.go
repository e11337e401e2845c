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
// openRO (nil to skip) reads them read-only and refuses to write them.
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
