package stores

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// The acceptance protocol of the core issue, through real HTTP, with
// --store redis://…
func TestRedisAcceptance(t *testing.T) {
	srv := redistest.Start(t) // its own server: the protocol's event ids are fixed
	proxytest.RunAcceptance(t, func(t *testing.T) dedupe.Store { return mustOpen(t, srv.URL()) })
}

// Two hookonce replicas (two proxies, two Stores) on one Redis: 10 events ×
// 6 deliveries at once, spread over both, run the site's handler exactly 10
// times, every delivery gets a 2xx (proxytest.RunTwoReplicas).
func TestRedisTwoReplicas(t *testing.T) {
	srv := redistest.Start(t)
	proxytest.RunTwoReplicas(t, func(t *testing.T) dedupe.Store { return mustOpen(t, srv.URL()) })
}

// Serialize across two replicas on one Redis (woken over Pub/Sub when an
// order is freed): every order shipped once (proxytest.RunSerializeReplicas).
func TestRedisSerializeTwoReplicas(t *testing.T) {
	srv := redistest.Start(t)
	proxytest.RunSerializeReplicas(t, func(t *testing.T) dedupe.Store { return mustOpen(t, srv.URL()) })
}

// Redis stopped or frozen: a new event is refused with 503 + Retry-After
// and the site sees nothing; once Redis is back, the sender's retry is
// processed once, by the same proxy and Store.
func TestRedisOutageThroughProxy(t *testing.T) {
	srv := redistest.Start(t)
	// Not a speed check: a store call must end at store_timeout (500ms),
	// never hang on a dead server.
	const within = 5 * time.Second
	notDone := func(status int) bool { return status/100 != 2 }
	// A short lease, so that a claim written by a frozen Redis after the
	// proxy gave up on it (the command was already in the socket) frees soon.
	const defaults = `
store_timeout: 500ms
lease: 1s
wait_timeout: 2s`
	proxytest.RunOutageThroughProxy(t, mustOpen(t, srv.URL()), defaults,
		proxytest.Outage{Name: "stopped", Down: srv.Stop, Up: srv.Start, Within: within, RetryWhile: notDone},
		// A frozen Redis may still apply the claim it had in its socket
		// when it resumes; that claim's lease (1s here) then runs out and
		// the retry takes it over: still one execution.
		proxytest.Outage{Name: "frozen", Down: srv.Pause, Up: srv.Resume, Within: within, RetryWhile: notDone},
	)
}

// A refused conflict accepted through the proxy runs once at the site
// (proxytest.RunAcceptConflict).
func TestRedisAcceptConflict(t *testing.T) {
	srv := redistest.Start(t)
	proxytest.RunAcceptConflict(t, func(t *testing.T) dedupe.Store { return mustOpen(t, srv.URL()) })
}

// wait_replicas through the proxy, over a replication link that stalls:
// a new event is refused with 503 + Retry-After and the site is not
// called; once the link is back the retry runs once. A completion the
// replica cannot confirm is retried while the lease lasts and then
// reported as not stored (counted), never taken as stored by re-reading
// the primary's unconfirmed record.
func TestRedisWaitReplicasThroughProxy(t *testing.T) {
	primary, link := redistest.StartPrimaryWithReplica(t)
	url := primary.URL() + "?wait_replicas=1&wait_replicas_timeout=300ms"
	stallAtSite := make(chan struct{}, 1)
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stallAtSite:
			link.Stall() // while the site works: the completion cannot be confirmed
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	const config = `
defaults:
  store_timeout: 1s
  lease: 2s
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
`
	in := proxytest.Start(t, mustOpen(t, url), site.URL, config)
	hook := in.URL + "/hooks/shop"

	link.Stall()
	r := proxytest.Post(t, hook, `{"id":"wait-claim"}`)
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("claim over a stalled link: %d %q (Retry-After %q), want 503 with Retry-After", r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	if n := site.Executions("wait-claim"); n != 0 {
		t.Fatalf("site ran %d times for an unconfirmed claim, want 0", n)
	}
	link.Resume()
	// The sender retries while the replica catches up (on a loaded machine
	// it may miss the first retry's wait: 503 again, given back again).
	for try := 1; ; try++ {
		r := proxytest.Post(t, hook, `{"id":"wait-claim"}`)
		if r.Status == http.StatusOK {
			break
		}
		if r.Status != http.StatusServiceUnavailable || try == 30 {
			t.Fatalf("retry %d once the link is back: %d %s", try, r.Status, r.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := proxytest.Post(t, hook, `{"id":"wait-claim"}`); !r.Replayed() {
		t.Fatalf("duplicate: %d %s, want a replay", r.Status, r.Body)
	}
	if n := site.Executions("wait-claim"); n != 1 {
		t.Fatalf("site ran %d times, want 1", n)
	}

	stallAtSite <- struct{}{}
	r = proxytest.Post(t, hook, `{"id":"wait-complete"}`)
	link.Resume()
	if r.Status != http.StatusOK {
		t.Fatalf("event whose completion is not confirmed: %d %s, want the site's 200", r.Status, r.Body)
	}
	if got := proxytest.Metric(t, in.Registry, "hookonce_answers_not_stored_total"); got != 1 {
		t.Errorf("hookonce_answers_not_stored_total = %v, want 1\n%s", got, in.Logs.String())
	}
	if !strings.Contains(in.Logs.String(), "not confirmed by the store's replicas") {
		t.Errorf("logs do not say why the answer is not stored:\n%s", in.Logs.String())
	}
}
