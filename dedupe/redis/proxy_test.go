package redis_test

import (
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/redistest"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// The acceptance protocol of the core issue, through real HTTP, with
// --store redis://…
func TestAcceptance(t *testing.T) {
	srv := redistest.Start(t) // its own server: the protocol's event ids are fixed
	proxytest.RunAcceptance(t, func(t *testing.T) dedupe.Store { return mustOpen(t, srv.URL()) })
}

// Two hookonce replicas (two proxies, two Stores) on one Redis: 10 events ×
// 6 deliveries at once, spread over both, run the site's handler exactly 10
// times, every delivery gets a 2xx (proxytest.RunTwoReplicas).
func TestTwoReplicas(t *testing.T) {
	srv := redistest.Start(t)
	proxytest.RunTwoReplicas(t, func(t *testing.T) dedupe.Store { return mustOpen(t, srv.URL()) })
}

// Serialize across two replicas on one Redis (woken over Pub/Sub when an
// order is freed): every order shipped once (proxytest.RunSerializeReplicas).
func TestSerializeTwoReplicas(t *testing.T) {
	srv := redistest.Start(t)
	proxytest.RunSerializeReplicas(t, func(t *testing.T) dedupe.Store { return mustOpen(t, srv.URL()) })
}

// Redis stopped or frozen: a new event is refused with 503 + Retry-After
// and the site sees nothing; once Redis is back, the sender's retry is
// processed once, by the same proxy and Store.
func TestOutageThroughProxy(t *testing.T) {
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
func TestAcceptConflict(t *testing.T) {
	srv := redistest.Start(t)
	proxytest.RunAcceptConflict(t, func(t *testing.T) dedupe.Store { return mustOpen(t, srv.URL()) })
}
