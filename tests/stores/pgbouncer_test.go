package stores

import (
	"net/http"
	"testing"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/pgbouncertest"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// A replica storm through PgBouncer: three hookonce replicas, each with a
// store of its own (its own pool), all through one PgBouncer in
// transaction pooling mode with two server connections; 25 events × 8
// copies at once, spread over the replicas. Each event runs once at the
// site, every delivery gets a 2xx (the copies the replayed answer), and
// every answer is stored.
func TestPgBouncerReplicaStorm(t *testing.T) {
	b := pgbouncertest.Start(t, pgtest.Shared(t), pgbouncertest.Options{})
	dsn := b.Database(t, "")
	proxytest.RunStorm(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) },
		proxytest.Storm{Replicas: 3, Events: 25, Copies: 8, Prefix: "storm"})
}

// hookonce serve itself, through PgBouncer with pooler=transaction: it
// starts (it used to exit at start on pgx's prepared statements), runs an
// event once and replays its stored answer.
func TestPgBouncerServe(t *testing.T) {
	b := pgbouncertest.Start(t, pgtest.Shared(t), pgbouncertest.Options{})
	site := proxytest.NewSite(t, nil)
	_, url := startBinary(t, b.Database(t, ""), site.URL)
	first := proxytest.Post(t, url+"/hooks/shop", `{"id":"serve-1"}`)
	again := proxytest.Post(t, url+"/hooks/shop", `{"id":"serve-1"}`)
	if first.Status != http.StatusOK || first.Replayed() || again.Status != http.StatusOK || !again.Replayed() {
		t.Fatalf("through serve and PgBouncer: %d replayed=%v, then %d replayed=%v %s",
			first.Status, first.Replayed(), again.Status, again.Replayed(), again.Body)
	}
	if n := site.Executions("serve-1"); n != 1 {
		t.Fatalf("site ran %d times, want 1", n)
	}
}
