package proxytest

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// RunTwoReplicas runs two hookonce replicas (two proxies, each on its own
// Store from newStore, both on one backend) in front of one counting site:
// 10 events × 6 deliveries at once, spread over both, must run the site's
// handler exactly 10 times, every delivery gets a 2xx, and for each event
// the 5 deliveries that did not run it get the replayed answer.
//
// newStore is called twice; both Stores must share their records (one
// database, one Redis, one SQLite file).
func RunTwoReplicas(t *testing.T, newStore func(t *testing.T) dedupe.Store) {
	site := NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(150 * time.Millisecond) // every copy arrives while the first runs
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	replicas := []*Instance{
		Start(t, newStore(t), site.URL, AcceptanceConfig),
		Start(t, newStore(t), site.URL, AcceptanceConfig),
	}
	const events, copies = 10, 6
	replies := make([][]Reply, events)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for e := range events {
		replies[e] = make([]Reply, copies)
		for c := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				url := replicas[(e+c)%2].URL + "/hooks/shop"
				replies[e][c] = Post(t, url, fmt.Sprintf(`{"id":"two-replicas-%d","n":1}`, e))
			}()
		}
	}
	close(start)
	wg.Wait()
	// Waiters of keys the other replica finished are gone too.
	for i, r := range replicas {
		if n := r.Proxy.Waiting(); n != 0 {
			t.Errorf("replica %d still holds %d waited-on keys after every delivery ended", i, n)
		}
	}
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
