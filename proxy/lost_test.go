package proxy_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

const lostConfig = `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
    store_request_body: true
    retry_window: 1s
    upstream_timeout: 2s
`

// A sender that retried three times against a site that was down, then
// gave up: the event is kept as released with its three attempts, becomes
// unretried after the sender's window, and an operator's redelivery runs
// the handler once the site is back.
func TestEventThatNeverCompleted(t *testing.T) {
	var up atomic.Bool
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	store := newStore(t)
	px := proxytest.Start(t, store, site.URL, lostConfig)
	for range 3 {
		if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"lost-1","amount":10}`, "X-Signature", "kept"); r.Status != 503 {
			t.Fatalf("site down: status %d", r.Status)
		}
	}
	rec, err := get(t, store, "shop", "lost-1")
	if err != nil || rec.State != dedupe.StateReleased || len(rec.Attempts) != 3 {
		t.Fatalf("record = %+v, %v; want released with 3 attempts", rec, err)
	}
	for _, a := range rec.Attempts {
		if a.By != dedupe.AttemptBySender || a.Outcome != "released" || a.Status != 503 || a.Replica == "" {
			t.Fatalf("attempt = %+v", a)
		}
	}
	ctx := context.Background()
	if got, _ := px.Proxy.Unretried(ctx, "", time.Now()); len(got) != 0 {
		t.Fatalf("unretried within the retry window: %d", len(got))
	}
	later := time.Now().Add(2 * time.Second)
	got, err := px.Proxy.Unretried(ctx, "shop", later)
	if err != nil || len(got) != 1 || got[0].Key != "lost-1" {
		t.Fatalf("unretried after the window = %v, %v", got, err)
	}
	// The watcher counts it and logs it once.
	wctx, cancel := context.WithCancel(ctx)
	time.Sleep(1100 * time.Millisecond)
	go px.Proxy.WatchUnretried(wctx, 50*time.Millisecond)
	waitFor(t, func() bool {
		return proxytest.Metric(t, px.Registry, "hookonce_unretried_events", "sender", "shop") == 1
	})
	time.Sleep(150 * time.Millisecond)
	if n := strings.Count(px.Logs.String(), "stopped retrying"); n != 1 {
		t.Errorf("logged %d times, want once", n)
	}

	up.Store(true)
	before := site.Executions("lost-1")
	res, err := px.Proxy.Redeliver(ctx, "shop", "lost-1", false)
	if err != nil || res.Outcome != "processed" || res.Status != 200 {
		t.Fatalf("redeliver = %+v, %v", res, err)
	}
	if n := site.Executions("lost-1") - before; n != 1 {
		t.Fatalf("redelivery ran the handler %d times", n)
	}
	if h := site.LastHeader("lost-1"); h.Get("X-Signature") != "kept" || h.Get("Idempotency-Key") != "shop:lost-1" {
		t.Fatalf("redelivered headers = %v", h)
	}
	rec, _ = get(t, store, "shop", "lost-1")
	if rec.State != dedupe.StateDone || len(rec.Attempts) != 4 || rec.LastAttempt().By != dedupe.AttemptByOperator {
		t.Fatalf("after redelivery: %+v", rec)
	}
	waitFor(t, func() bool {
		return proxytest.Metric(t, px.Registry, "hookonce_unretried_events", "sender", "shop") == 0
	})
	cancel()

	// The sender's own late retry is now a duplicate.
	if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"lost-1","amount":10}`); !r.Replayed() {
		t.Fatal("late retry not replayed")
	}
	// A done event is refused unless forced.
	if _, err := px.Proxy.Redeliver(ctx, "shop", "lost-1", false); !errors.Is(err, proxy.ErrDone) {
		t.Fatalf("redeliver done = %v, want ErrDone", err)
	}
	hist, err := get(t, store, "shop", "lost-1")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := px.Proxy.Redeliver(ctx, "shop", "lost-1", true); err != nil || res.Outcome != "processed" {
		t.Fatalf("forced = %+v %v", res, err)
	}
	if n := site.Executions("lost-1") - before; n != 2 {
		t.Fatalf("forced redelivery: %d executions since the site came back, want 2", n)
	}
	// The history survives the forced run: every earlier attempt, the
	// operator's release and the run itself.
	rec, err = get(t, store, "shop", "lost-1")
	if err != nil || rec.State != dedupe.StateDone || len(rec.Attempts) != len(hist.Attempts)+2 {
		t.Fatalf("after the forced run: %+v %v, want done with %d attempts", rec, err, len(hist.Attempts)+2)
	}
	for i, a := range hist.Attempts {
		if rec.Attempts[i].Outcome != a.Outcome || !rec.Attempts[i].At.Equal(a.At) {
			t.Fatalf("attempt %d changed: %+v, was %+v", i, rec.Attempts[i], a)
		}
	}
	if a := rec.Attempts[len(hist.Attempts)]; a.By != dedupe.AttemptByOperator || a.Outcome != "released" {
		t.Fatalf("operator's release attempt = %+v", a)
	}
}

func TestRedeliverRefusals(t *testing.T) {
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	store := newStore(t)
	px := proxytest.Start(t, store, site.URL, lostConfig+`
  - name: nobody
    match: { path: /hooks/nobody }
    key: [ { body: id } ]
`)
	proxytest.Post(t, px.URL+"/hooks/nobody", `{"id":"n1"}`)
	ctx := context.Background()
	if _, err := px.Proxy.Redeliver(ctx, "nobody", "n1", false); !errors.Is(err, proxy.ErrNotKept) {
		t.Fatalf("body not kept: %v", err)
	}
	if _, err := px.Proxy.Redeliver(ctx, "shop", "none", false); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("no record: %v", err)
	}
	if _, err := px.Proxy.Redeliver(ctx, "ghost", "x", false); !errors.Is(err, proxy.ErrNoSender) {
		t.Fatalf("no sender: %v", err)
	}
}

// Two replicas: an operator's redelivery on one races the sender's late
// retry on the other; the handler runs once.
func TestRedeliveryRacingALateRetry(t *testing.T) {
	var up atomic.Bool
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		time.Sleep(100 * time.Millisecond)
		_, _ = w.Write([]byte("ok"))
	})
	path := t.TempDir() + "/shared.db"
	a := proxytest.Start(t, openAt(t, path), site.URL, lostConfig)
	b := proxytest.Start(t, openAt(t, path), site.URL, lostConfig)
	for i := range 10 {
		proxytest.Post(t, a.URL+"/hooks/shop", `{"id":"race-`+string(rune('a'+i))+`"}`)
	}
	up.Store(true)
	var wg sync.WaitGroup
	for i := range 10 {
		id := "race-" + string(rune('a'+i))
		wg.Add(2)
		go func() { defer wg.Done(); _, _ = a.Proxy.Redeliver(context.Background(), "shop", id, false) }()
		go func() { defer wg.Done(); proxytest.Post(t, b.URL+"/hooks/shop", `{"id":"`+id+`"}`) }()
	}
	wg.Wait()
	for i := range 10 {
		id := "race-" + string(rune('a'+i))
		// One failed run while the site was down, then exactly one more.
		if n := site.Executions(id); n != 2 {
			t.Errorf("%s ran %d times, want 2 (one failed, one completed)", id, n)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
