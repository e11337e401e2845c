package proxytest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// RunTwoReplicas runs two hookonce replicas (two proxies, each on its own
// Store from newStore, both on one backend) in front of one counting site:
// 10 events × 6 deliveries at once, spread over both (RunStorm).
//
// newStore is called for each replica and once more to read the records;
// every Store must share its records (one database, one Redis, one SQLite
// file).
func RunTwoReplicas(t *testing.T, newStore func(t *testing.T) dedupe.Store) {
	RunStorm(t, newStore, Storm{Replicas: 2, Events: 10, Copies: 6, Prefix: "two-replicas"})
}

// Storm is a replica storm's size: Events events, Copies deliveries of
// each sent at once, spread over Replicas proxies; event ids start with
// Prefix.
type Storm struct {
	Replicas, Events, Copies int
	Prefix                   string
}

// RunStorm fires a replica storm at one counting site (each delivery of
// an event arrives while the first runs): the site's handler runs exactly
// once per event, every delivery gets a 2xx, the copies that did not run
// it get the replayed answer, every record is done with the site's answer,
// no replica logs an answer not stored, and no replica still waits on a
// key once every delivery ended.
func RunStorm(t *testing.T, newStore func(t *testing.T) dedupe.Store, st Storm) {
	site := NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(150 * time.Millisecond) // every copy arrives while the first runs
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	replicas := make([]*Instance, st.Replicas)
	for i := range replicas {
		replicas[i] = Start(t, newStore(t), site.URL, AcceptanceConfig)
	}
	events, copies := st.Events, st.Copies
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
				url := replicas[(e+c)%len(replicas)].URL + "/hooks/shop"
				replies[e][c] = Post(t, url, fmt.Sprintf(`{"id":"%s-%d","n":1}`, st.Prefix, e))
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
	check := newStore(t)
	for e := range events {
		id := fmt.Sprintf("%s-%d", st.Prefix, e)
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
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rec, err := check.Get(ctx, "shop", id)
		cancel()
		if err != nil || rec.State != dedupe.StateDone || rec.Response == nil || rec.Response.Status != 200 ||
			string(rec.Response.Body) != `{"ok":true}` || rec.Response.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: stored record %+v, %v; want done with the site's answer", id, rec, err)
		}
	}
	if n := site.Total(); n != events {
		t.Errorf("site ran %d times in all, want %d", n, events)
	}
	for i, r := range replicas {
		if strings.Contains(r.Logs.String(), "not stored") {
			t.Errorf("replica %d logged an answer not stored:\n%s", i, r.Logs.String())
		}
	}
}
