package proxy_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// frozenStore stands for a process that is paused (a long GC pause, a VM
// stall, SIGSTOP): while frozen is set, its renewals never reach the
// store, as a paused heartbeat's do not.
type frozenStore struct {
	dedupe.Store
	frozen atomic.Bool
}

func (f *frozenStore) Renew(ctx context.Context, sender, key, owner string, lease time.Duration) error {
	if f.frozen.Load() {
		return fmt.Errorf("renew: %w (paused)", dedupe.ErrUnavailable)
	}
	return f.Store.Renew(ctx, sender, key, owner, lease)
}

// A replica that won a claim and is then paused longer than the lease,
// between the claim and the forward, wakes up after a retry took the
// claim over and ran the handler. It must not forward on a claim it no
// longer holds: the handler runs once.
func TestPausedReplicaDoesNotForwardOnALostLease(t *testing.T) {
	const lease = 600 * time.Millisecond
	config := `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
    lease: 600ms
`
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	shared := newStore(t)
	paused := &frozenStore{Store: shared}
	wake := make(chan struct{})
	reached := make(chan struct{})
	var once atomic.Bool
	c, err := contract.Parse([]byte(config), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(site.URL)
	logs := &proxytest.SyncBuffer{}
	a, err := proxy.New(proxy.Options{
		Upstream: u, Contract: c, Store: paused,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		Failpoint: func(point string) {
			if point == "claimed" && once.CompareAndSwap(false, true) {
				paused.frozen.Store(true) // the whole process stops here
				close(reached)
				<-wake
				paused.frozen.Store(false)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srvA := httptest.NewServer(a)
	t.Cleanup(func() { srvA.Close(); _ = a.Close(t.Context()) })
	b := proxytest.Start(t, shared, site.URL, config)

	first := make(chan proxytest.Reply, 1)
	go func() { first <- proxytest.Post(t, srvA.URL+"/hooks/shop", `{"n":1}`, "X-Event-Id", "e1") }()
	<-reached
	time.Sleep(lease + 300*time.Millisecond) // the lease runs out while A is paused
	r := proxytest.Post(t, b.URL+"/hooks/shop", `{"n":1}`, "X-Event-Id", "e1")
	if r.Status != 200 || site.Executions("e1") != 1 {
		t.Fatalf("the retry on replica B: %d, executions %d; want it to take the expired claim over and run", r.Status, site.Executions("e1"))
	}
	close(wake)
	ra := <-first
	if n := site.Executions("e1"); n != 1 {
		t.Fatalf("the event ran %d times: the paused replica forwarded on a claim it no longer held\n%s", n, logs.String())
	}
	if ra.Status != http.StatusServiceUnavailable || ra.Header.Get("Retry-After") == "" {
		t.Fatalf("paused replica answered %d (Retry-After %q), want 503 + Retry-After", ra.Status, ra.Header.Get("Retry-After"))
	}
	rec, err := shared.Get(t.Context(), "shop", "e1")
	if err != nil || rec.State != dedupe.StateDone {
		t.Fatalf("record after both: %+v %v; want B's done record untouched", rec, err)
	}
	// A retry now is a duplicate, answered from B's record.
	if r := proxytest.Post(t, srvA.URL+"/hooks/shop", `{"n":1}`, "X-Event-Id", "e1"); !r.Replayed() || site.Executions("e1") != 1 {
		t.Fatalf("later retry: %d replayed=%v, executions %d", r.Status, r.Replayed(), site.Executions("e1"))
	}
}

// Paused for less than its lease, a replica forwards as usual: the check
// costs a renewal only when the lease is nearly gone.
func TestShortPauseStillForwards(t *testing.T) {
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	store := newStore(t)
	c, err := contract.Parse([]byte(`
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
    lease: 3s
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(site.URL)
	p, err := proxy.New(proxy.Options{Upstream: u, Contract: c, Store: store, Logger: slog.New(slog.DiscardHandler),
		Failpoint: func(point string) {
			if point == "claimed" {
				time.Sleep(200 * time.Millisecond)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(func() { srv.Close(); _ = p.Close(t.Context()) })
	if r := proxytest.Post(t, srv.URL+"/hooks/shop", `{}`, "X-Event-Id", "s1"); r.Status != 200 || site.Executions("s1") != 1 {
		t.Fatalf("short pause: %d, executions %d", r.Status, site.Executions("s1"))
	}
}

// A replica whose claim was taken over while the site worked on its
// forward (its renewals not reaching the store past the lease) logs its
// delivery with stored:false: the site ran, the answer is not the
// record's, and the operator can tell it from a stored one.
func TestAnswerNotStoredIsLoggedAsSuch(t *testing.T) {
	release := make(chan struct{})
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Slow") != "" {
			<-release
		}
		fmt.Fprint(w, "ok")
	})
	config := `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
    lease: 600ms
`
	shared := newStore(t)
	paused := &frozenStore{Store: shared}
	c, err := contract.Parse([]byte(config), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(site.URL)
	logs := &proxytest.SyncBuffer{}
	a, err := proxy.New(proxy.Options{Upstream: u, Contract: c, Store: paused, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srvA := httptest.NewServer(a)
	t.Cleanup(func() { srvA.Close(); _ = a.Close(t.Context()) })
	b := proxytest.Start(t, shared, site.URL, config)

	first := make(chan proxytest.Reply, 1)
	go func() { first <- proxytest.Post(t, srvA.URL+"/hooks/shop", `{}`, "X-Event-Id", "e2", "X-Slow", "1") }()
	for site.Executions("e2") == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	paused.frozen.Store(true) // A's renewals stop reaching the store
	time.Sleep(900 * time.Millisecond)
	if r := proxytest.Post(t, b.URL+"/hooks/shop", `{}`, "X-Event-Id", "e2"); r.Status != 200 {
		t.Fatalf("the retry on B: %d", r.Status)
	}
	paused.frozen.Store(false)
	close(release)
	<-first
	if !strings.Contains(logs.String(), `"stored":false`) || !strings.Contains(logs.String(), "answer not stored") {
		t.Fatalf("A's log does not say its answer was not stored:\n%s", logs.String())
	}
}

// Forwards that take no claim but know the event's key (shadow mode,
// on_store_error: forward) carry Idempotency-Key like a claimed one.
func TestShadowForwardsCarryTheKey(t *testing.T) {
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, newStore(t), site.URL, `
senders:
  - name: shop
    mode: shadow
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
`)
	for range 2 {
		proxytest.Post(t, px.URL+"/hooks/shop", `{}`, "X-Event-Id", "s9")
	}
	if site.Executions("s9") != 2 || site.LastHeader("s9").Get("Idempotency-Key") != "shop:s9" {
		t.Fatalf("executions %d, last Idempotency-Key %q; want both forwarded with shop:s9", site.Executions("s9"), site.LastHeader("s9").Get("Idempotency-Key"))
	}
}

// renewCounter counts the renewals that reach the store, and how many are
// under way; each takes a little while, as a real one over a network does.
type renewCounter struct {
	dedupe.Store
	started, running atomic.Int64
}

func (r *renewCounter) Renew(ctx context.Context, sender, key, owner string, lease time.Duration) error {
	r.started.Add(1)
	r.running.Add(1)
	defer r.running.Add(-1)
	time.Sleep(20 * time.Millisecond)
	return r.Store.Renew(ctx, sender, key, owner, lease)
}

// The heartbeat renews again and again while the site works (not once),
// and once the delivery has ended no renewal is under way and none starts
// later: the proxy's Close, which waits for its deliveries, leaves the
// store alone.
func TestHeartbeatRenewsUntilStoppedAndNoLonger(t *testing.T) {
	store := &renewCounter{Store: newStore(t)}
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		// Renewals are due every lease/3 = 200ms: at 200, 400 and 600ms
		// while the site works, the next at 800ms, well after the end.
		time.Sleep(650 * time.Millisecond)
		fmt.Fprint(w, "ok")
	})
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
    lease: 600ms
`)
	if r := proxytest.Post(t, px.URL+"/hooks/shop", `{}`, "X-Event-Id", "hb1"); r.Status != 200 || site.Executions("hb1") != 1 {
		t.Fatalf("slow delivery: %d, executions %d", r.Status, site.Executions("hb1"))
	}
	if err := px.Proxy.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	n := store.started.Load()
	if n < 3 {
		t.Fatalf("%d renewals in 650ms under a 600ms lease; want one every 200ms", n)
	}
	if r := store.running.Load(); r != 0 {
		t.Fatalf("%d renewals still under way after the delivery ended", r)
	}
	time.Sleep(500 * time.Millisecond) // past two more renewals' due times
	if m := store.started.Load(); m != n {
		t.Fatalf("renewals after the delivery ended: %d, then %d", n, m)
	}
	if logs := px.Logs.String(); strings.Contains(logs, "claim lost") || strings.Contains(logs, "lease not renewed") {
		t.Fatalf("a renewal failed:\n%s", logs)
	}
}
