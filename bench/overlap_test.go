package bench_test

import (
	"slices"
	"testing"
	"time"
)

// batchOverlap sorts the growth test's new events by whether they
// overlapped a purge batch: one that starts inside a batch, one that ends
// inside it and one that spans it all meet it; one that ends as it starts,
// or starts after it ends, does not.
func TestBatchOverlap(t *testing.T) {
	t0 := time.Now()
	ms := func(a, b int) span {
		return span{t0.Add(time.Duration(a) * time.Millisecond), t0.Add(time.Duration(b) * time.Millisecond)}
	}
	batches := []span{ms(10, 20), ms(40, 50)}
	events := []span{
		ms(0, 5),   // before: 5 ms
		ms(5, 10),  // ends as the first batch starts: 5 ms
		ms(15, 25), // starts inside: 10 ms, meets
		ms(20, 21), // starts as it ends: 1 ms
		ms(35, 45), // ends inside the second: 10 ms, meets
		ms(30, 90), // spans the second: 60 ms, meets, the slowest
		ms(60, 62), // after both: 2 ms
	}
	o := batchOverlap(events, batches)
	met, other, slowMet, slow := o.met, o.other, o.slowMet, o.slow
	if o.n != 3 || o.all != 10*time.Millisecond {
		t.Errorf("%d events met a batch, p99 of all %s; want 3 and 10 ms", o.n, o.all)
	}
	// met: 10, 10, 60 ms; the others 1, 2, 5, 5 ms (the p99 of few is
	// the second slowest: index (n-1)·99/100)
	if met != 10*time.Millisecond || other != 5*time.Millisecond {
		t.Errorf("p99 met %s, others %s; want 10ms and 5ms", met, other)
	}
	if slow != 1 || slowMet != 1 {
		t.Errorf("slower than the p99 of 7: %d, %d met; want the 60 ms one, meeting a batch", slow, slowMet)
	}
	for i := range 200 { // 200 quick events after the batches: the p99 is now 5 ms
		events = append(events, ms(100+i, 101+i))
	}
	if o = batchOverlap(events, batches); o.slow != 3 || o.slowMet != 3 {
		t.Errorf("slower than the p99 of 207: %d, %d met; want the three of 10, 10 and 60 ms, all meeting a batch", o.slow, o.slowMet)
	}
	events = append(events, ms(300, 330), ms(400, 440)) // two slow ones that meet no batch
	if o = batchOverlap(events, batches); o.slow != 3 || o.slowMet != 1 {
		t.Errorf("slower than the p99 of 209: %d, %d met; want 60, 40 and 30 ms, one meeting a batch", o.slow, o.slowMet)
	}
}

// windowP99s: full windows only, unanswered requests left out, each
// window's own p99, in the windows' order.
func TestWindowP99s(t *testing.T) {
	var byDue []time.Duration
	for i := range 100 { // p99 of 1..100 ms: the 99th value
		byDue = append(byDue, time.Duration(100-i)*time.Millisecond)
	}
	for i := range 100 {
		l := 5 * time.Millisecond
		if i%10 == 0 {
			l = -1 // not answered
		}
		byDue = append(byDue, l)
	}
	for range 50 { // a window cut short: not one
		byDue = append(byDue, time.Second)
	}
	got := windowP99s(byDue, 100)
	want := []time.Duration{99 * time.Millisecond, 5 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Fatalf("windowP99s = %v, want %v", got, want)
	}
	if got := windowP99s(byDue, 0); got != nil {
		t.Fatalf("windows of 0: %v", got)
	}
}
