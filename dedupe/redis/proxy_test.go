package redis_test

import (
	"fmt"
	"io"
	"net/http"
	"sync"
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
// times and every delivery gets a 2xx.
func TestTwoReplicas(t *testing.T) {
	srv := redistest.Start(t)
	site := proxytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(150 * time.Millisecond) // every copy arrives while the first runs
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	replicas := []*proxytest.Instance{
		proxytest.Start(t, mustOpen(t, srv.URL()), site.URL, proxytest.AcceptanceConfig),
		proxytest.Start(t, mustOpen(t, srv.URL()), site.URL, proxytest.AcceptanceConfig),
	}
	const events, copies = 10, 6
	replies := make([][]proxytest.Reply, events)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for e := range events {
		replies[e] = make([]proxytest.Reply, copies)
		for c := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				url := replicas[(e+c)%2].URL + "/hooks/shop"
				replies[e][c] = proxytest.Post(t, url, fmt.Sprintf(`{"id":"two-replicas-%d","n":1}`, e))
			}()
		}
	}
	close(start)
	wg.Wait()
	for e := range events {
		id := fmt.Sprintf("two-replicas-%d", e)
		if n := site.Executions(id); n != 1 {
			t.Errorf("%s: %d executions, want 1", id, n)
		}
		replayed := 0
		for c, r := range replies[e] {
			if r.Status < 200 || r.Status > 299 {
				t.Errorf("%s delivery %d: status %d %s", id, c, r.Status, r.Body)
			}
			if r.Replayed() {
				replayed++
			}
		}
		if replayed != copies-1 {
			t.Errorf("%s: %d replayed answers, want %d", id, replayed, copies-1)
		}
	}
	if n := site.Total(); n != events {
		t.Errorf("site ran %d times in all, want %d", n, events)
	}
}

// A short lease, so that a claim written by a frozen Redis after the proxy
// gave up on it (the command was already in the socket) frees soon.
const outageConfig = `
defaults:
  store_timeout: 500ms
  lease: 1s
  wait_timeout: 2s
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
`

// Redis stopped or frozen: a new event is refused with 503 + Retry-After
// and the site sees nothing; once Redis is back, the sender's retry is
// processed once, by the same proxy and Store.
func TestOutageThroughProxy(t *testing.T) {
	srv := redistest.Start(t)
	site := proxytest.NewUpstream(t, nil)
	px := proxytest.Start(t, mustOpen(t, srv.URL()), site.URL, outageConfig)
	url := px.URL + "/hooks/shop"

	tests := []struct {
		name      string
		down, fix func(testing.TB)
	}{
		{"stopped", srv.Stop, srv.Start},
		// A frozen Redis may still apply the claim it had in its socket
		// when it resumes; that claim's lease (1s here) then runs out and
		// the retry takes it over: still one execution.
		{"frozen", srv.Pause, srv.Resume},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "during-outage-" + tt.name
			body := fmt.Sprintf(`{"id":%q}`, id)
			tt.down(t)
			began := time.Now()
			got := proxytest.Post(t, url, body)
			if got.Status != http.StatusServiceUnavailable || got.Header.Get("Retry-After") == "" {
				tt.fix(t)
				t.Fatalf("Redis %s: %d Retry-After=%q %s", tt.name, got.Status, got.Header.Get("Retry-After"), got.Body)
			}
			// Not a speed check: a store call must end at store_timeout,
			// never hang on a dead server.
			if took := time.Since(began); took > 5*time.Second {
				t.Errorf("503 took %v with store_timeout 500ms", took)
			}
			if n := site.Executions(id); n != 0 {
				t.Errorf("site ran %d times while Redis was %s", n, tt.name)
			}
			tt.fix(t)

			deadline := time.Now().Add(20 * time.Second)
			for {
				got = proxytest.Post(t, url, body)
				if got.Status/100 == 2 || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond) // the sender's retry schedule
			}
			if got.Status != http.StatusOK || got.Replayed() {
				t.Fatalf("retry after the outage: %d replayed=%v %s", got.Status, got.Replayed(), got.Body)
			}
			if again := proxytest.Post(t, url, body); !again.Replayed() {
				t.Fatalf("repeat after the outage not replayed: %d %s", again.Status, again.Body)
			}
			if n := site.Executions(id); n != 1 {
				t.Fatalf("executions = %d, want 1", n)
			}
		})
	}
}
