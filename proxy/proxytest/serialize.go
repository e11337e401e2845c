package proxytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// NaiveShop is the handler the serialize scenario runs at the site: "no
// shipment for this order yet? (work for 200 ms) create one" — the seed's
// SELECT-then-INSERT, racing between different events about one order.
// It counts shipments per order and the peak number of handlers running
// at once for one order and in all.
type NaiveShop struct {
	*Site
	mu        sync.Mutex
	shipments map[string]int
	running   map[string]int
	peakOrder int // most handlers at once for one order
	work      time.Duration
}

// NewNaiveShop starts the site; each event's JSON body names its "order".
func NewNaiveShop(t testing.TB, work time.Duration) *NaiveShop {
	s := &NaiveShop{shipments: map[string]int{}, running: map[string]int{}, work: work}
	s.Site = NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Order string `json:"order"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &ev)
		s.mu.Lock()
		s.running[ev.Order]++
		s.peakOrder = max(s.peakOrder, s.running[ev.Order])
		none := s.shipments[ev.Order] == 0 // SELECT
		s.mu.Unlock()
		if none {
			time.Sleep(s.work) // the handler works: the window the race needs
			s.mu.Lock()
			s.shipments[ev.Order]++ // INSERT
			s.mu.Unlock()
		} else {
			time.Sleep(s.work / 4)
		}
		s.mu.Lock()
		s.running[ev.Order]--
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	return s
}

// Shipments is how many shipments were created in all.
func (s *NaiveShop) Shipments() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.shipments {
		n += v
	}
	return n
}

// PeakPerOrder is the most handlers that ran at once for one order.
func (s *NaiveShop) PeakPerOrder() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peakOrder
}

// SerializeConfig is a shop sender keyed on the event id, serializing on
// the order when serialize is true.
func SerializeConfig(serialize bool) string {
	c := `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
`
	if serialize {
		c += "    serialize: { key: [ { body: order } ], scope: orders, wait: 30s }\n"
	}
	return c
}

// StormResult is what a serialize storm did.
type StormResult struct {
	Shipments, Executions, PeakPerOrder, Peak int
	Statuses                                  map[int]int
}

// RunSerializeStorm sends orders × 3 different events (created, paid,
// updated) at once, spread over replicas (one proxy each, every store from
// newStore sharing one backend), to a NaiveShop, and reports the effects.
func RunSerializeStorm(t *testing.T, newStore func(t *testing.T) dedupe.Store, replicas, orders int, serialize bool) StormResult {
	t.Helper()
	shop := NewNaiveShop(t, 200*time.Millisecond)
	var px []*Instance
	for range replicas {
		px = append(px, Start(t, newStore(t), shop.URL, SerializeConfig(serialize)))
	}
	kinds := []string{"created", "paid", "updated"}
	run := fmt.Sprintf("r%d-", time.Now().UnixNano()) // runs on one database stay apart
	res := StormResult{Statuses: map[int]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for o := range orders {
		for k, kind := range kinds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				url := px[(o+k)%len(px)].URL + "/hooks/shop"
				r := Post(t, url, fmt.Sprintf(`{"id":"%sord%d-%s","order":"%sord%d","type":%q}`, run, o, kind, run, o, kind))
				mu.Lock()
				res.Statuses[r.Status]++
				mu.Unlock()
			}()
		}
	}
	close(start)
	wg.Wait()
	for o := range orders {
		for _, kind := range kinds {
			if n := shop.Executions(fmt.Sprintf("%sord%d-%s", run, o, kind)); n != 1 {
				t.Errorf("event %sord%d-%s ran %d times, want once", run, o, kind, n)
			}
		}
	}
	res.Shipments, res.Executions, res.PeakPerOrder, res.Peak = shop.Shipments(), shop.Total(), shop.PeakPerOrder(), shop.Peak()
	return res
}

// RunSerializeReplicas runs the storm over two replicas on one backend
// (RunSerialize).
func RunSerializeReplicas(t *testing.T, newStore func(t *testing.T) dedupe.Store) {
	RunSerialize(t, newStore, 2)
}

// RunSerialize runs the storm over replicas on one backend, with and
// without serialize: without, orders ship more than once (the control:
// else the scenario proves nothing); with, every order ships once, no two
// deliveries about one order run at once across the replicas, and
// different orders run in parallel.
func RunSerialize(t *testing.T, newStore func(t *testing.T) dedupe.Store, replicas int) {
	const orders = 20
	t.Run("Control", func(t *testing.T) {
		r := RunSerializeStorm(t, newStore, replicas, orders, false)
		t.Logf("%d replica(s) without serialize: %d shipments for %d orders, peak %d per order, %d at once",
			replicas, r.Shipments, orders, r.PeakPerOrder, r.Peak)
		if r.Shipments <= orders {
			t.Errorf("%d shipments: the control did not race", r.Shipments)
		}
	})
	t.Run("Serialize", func(t *testing.T) {
		r := RunSerializeStorm(t, newStore, replicas, orders, true)
		t.Logf("%d replica(s) with serialize: %d shipments for %d orders, peak %d per order, %d at once, answers %v",
			replicas, r.Shipments, orders, r.PeakPerOrder, r.Peak, r.Statuses)
		if r.Shipments != orders || r.PeakPerOrder != 1 || r.Statuses[200] != 3*orders {
			t.Errorf("%d shipments (want %d), peak %d per order (want 1), answers %v", r.Shipments, orders, r.PeakPerOrder, r.Statuses)
		}
		if r.Peak < 4 {
			t.Errorf("at most %d handlers ran at once: different orders were serialized too", r.Peak)
		}
	})
}
