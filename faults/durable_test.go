package faults_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
	"github.com/hookonce/hookonce/internal/testkit/servetest"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// durableKillConfig: a sender that never resends (CDEK's "will not try
// again"), answered by hookonce once its delivery is stored.
const durableKillConfig = `
senders:
  - name: cdek
    match: { path: /hooks/cdek }
    key: [ { body: id } ]
    ack: durable
    lease: 2s
    upstream_timeout: 5s
`

// TestDurableKill9: 20 events of a never-resending sender, each sent once
// while the site is down, are answered 2xx within a second; serve is
// killed with -9 during the outage. Once the site is back, every event
// runs exactly once: on SQLite through the process restarted on the same
// file, on PostgreSQL and Redis through a second replica that was running
// all along.
func TestDurableKill9(t *testing.T) {
	t.Parallel()
	needBinary(t)
	for _, b := range []struct {
		name     string
		dsn      func(t *testing.T) string
		replicas bool // a second replica takes the dead one's work
	}{
		{"SQLite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "hookonce.db") }, false},
		{"Postgres", func(t *testing.T) string { return pgtest.Shared(t).NewDatabase(t) }, true},
		{"Redis", func(t *testing.T) string { return redistest.Start(t).URL() }, true},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			durableKill(t, b.dsn(t), b.replicas)
		})
	}
}

func durableKill(t *testing.T, dsn string, replicas bool) {
	site := proxytest.NewStoppableSite(t, nil)
	site.Stop()
	opts := serveOpts{store: dsn, upstream: site.URL, config: durableKillConfig,
		env: []string{"HOOKONCE_DURABLE_BACKOFF=300ms,600ms,1s"}}
	first := startServe(t, opts)
	var other *servetest.Server
	if replicas {
		other = startServe(t, opts)
	}
	client := newClient(t, 10*time.Second)
	const events = 20
	var wg sync.WaitGroup
	for i := 0; i < events; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			r := post(client, first.URL+"/hooks/cdek", fmt.Sprintf(`{"id":"d%d","status":"DELIVERED"}`, i))
			if took := time.Since(start); !r.ok() || took > time.Second {
				t.Errorf("event d%d: %s after %s, want 2xx within 1s", i, r, took)
			}
		}()
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond) // the first tries find the site down
	first.Kill9(t)
	if n := site.Total(); n != 0 {
		t.Fatalf("site ran %d times while down", n)
	}
	site.Start()
	if !replicas {
		startServe(t, opts) // the restarted process resumes its own
	}
	deadline := time.Now().Add(20 * time.Second)
	for site.Total() < events && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // a second run of any would come now
	for i := 0; i < events; i++ {
		if n := site.Executions(fmt.Sprintf("d%d", i)); n != 1 {
			t.Errorf("event d%d ran %d times, want 1", i, n)
		}
	}
	if other != nil {
		if n := counter(other.Metrics(t), "hookonce_pending_deliveries", "sender", "cdek"); n != 0 {
			// Counted every 5s: give the gauge its turn.
			time.Sleep(6 * time.Second)
			if n := counter(other.Metrics(t), "hookonce_pending_deliveries", "sender", "cdek"); n != 0 {
				t.Errorf("pending deliveries on the surviving replica = %v, want 0", n)
			}
		}
	}
}
