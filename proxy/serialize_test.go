package proxy_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// The seed's race between *different* events about one order: 20 orders ×
// (created, paid, updated) sent at once to a handler that checks "no
// shipment yet?" and then creates one. Without serialize hookonce forwards
// them together (each is a new event) and orders ship twice; with it,
// deliveries about one order run one at a time and every order ships once,
// while different orders still run in parallel.
func TestSerializeOneOrderAtATime(t *testing.T) {
	proxytest.RunSerialize(t, func(t *testing.T) dedupe.Store { return newStore(t) }, 1)
}

// Only what reaches the site takes the object: a duplicate of an event
// whose order is busy is answered as a duplicate (or waits on its own
// claim), never queued behind the order; and past serialize.wait a
// waiting delivery gives up with 503 + Retry-After, its claim freed and
// nothing stored, so the sender's retry runs it once.
func TestSerializeWaitBounded(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Event-Id") == "first" {
			<-release
		}
		fmt.Fprint(w, "ok")
	})
	store := newStore(t)
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
    serialize: { key: [ { body: order } ], wait: 300ms }
`)
	defer once.Do(func() { close(release) })
	if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"order":"o1"}`, "X-Event-Id", "zero"); r.Status != 200 || site.Executions("zero") != 1 {
		t.Fatalf("an earlier event about o1: %d, executions %d", r.Status, site.Executions("zero"))
	}
	firstDone := make(chan proxytest.Reply, 1)
	go func() {
		firstDone <- proxytest.Post(t, px.URL+"/hooks/shop", `{"order":"o1"}`, "X-Event-Id", "first")
	}()
	time.Sleep(200 * time.Millisecond) // first holds o1 at the site
	r := proxytest.Post(t, px.URL+"/hooks/shop", `{"order":"o1"}`, "X-Event-Id", "second")
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" || site.Executions("second") != 0 {
		t.Fatalf("second event on a busy order past wait: %d (Retry-After %q), executions %d; want 503 + Retry-After and none",
			r.Status, r.Header.Get("Retry-After"), site.Executions("second"))
	}
	proxytest.AssertFreed(t, store, "shop", "second")
	// A duplicate about the busy order is replayed at once: it takes no
	// object, so it neither waits for o1 nor gives up with 503.
	if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"order":"o1"}`, "X-Event-Id", "zero"); r.Status != 200 || !r.Replayed() || site.Executions("zero") != 1 {
		t.Fatalf("duplicate about the busy order: %d replayed=%v, executions %d; want the stored answer, no run", r.Status, r.Replayed(), site.Executions("zero"))
	}
	if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "shop", "outcome", proxy.OutcomeObjectBusy); n != 1 {
		t.Errorf("object_busy counted %v times, want 1", n)
	}
	// Another order is not held up.
	if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"order":"o2"}`, "X-Event-Id", "other"); r.Status != 200 {
		t.Fatalf("an event about another order: %d", r.Status)
	}
	once.Do(func() { close(release) })
	if r := <-firstDone; r.Status != 200 {
		t.Fatalf("first: %d", r.Status)
	}
	// The sender's retry of the refused event runs it, once.
	for range 2 {
		if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"order":"o1"}`, "X-Event-Id", "second"); r.Status != 200 {
			t.Fatalf("retry: %d %s", r.Status, r.Body)
		}
	}
	if n := site.Executions("second"); n != 1 {
		t.Fatalf("the retried event ran %d times, want once", n)
	}
	if n := proxytest.Metric(t, px.Registry, "hookonce_objects_busy", "scope", "shop"); n != 0 {
		t.Errorf("hookonce_objects_busy = %v after every delivery ended", n)
	}
}

// serialize is never silently off: an object key that is there but cannot
// be read as the site reads it (here a header sent under two spellings PHP merges, which anyone
// holding one captured delivery could add) is refused before the claim,
// as an unreadable event key is; an absent one runs unserialized, logged
// with object_err and counted.
func TestSerializeUnreadableObjectRefused(t *testing.T) {
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	store := newStore(t)
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
    serialize: { key: [ { header: X-Order } ] }
`)
	r := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"e1"}`, "X-Order", "o1", "X_Order", "o2")
	if r.Status != http.StatusBadRequest || site.Executions("e1") != 0 {
		t.Fatalf("object header sent twice: %d, executions %d; want 400 and none", r.Status, site.Executions("e1"))
	}
	if _, err := store.Get(t.Context(), "shop", "e1"); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("the refused delivery left a record: %v", err)
	}
	if !strings.Contains(px.Logs.String(), `"object_err"`) {
		t.Fatalf("the refusal's log line has no object_err:\n%s", px.Logs.String())
	}
	// The sender's genuine retry runs, once.
	for range 2 {
		if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"e1"}`, "X-Order", "o1"); r.Status != 200 {
			t.Fatalf("genuine delivery: %d", r.Status)
		}
	}
	if n := site.Executions("e1"); n != 1 {
		t.Fatalf("e1 ran %d times, want once", n)
	}

	// Absent: runs without the object's lock, and says so.
	if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"e2"}`); r.Status != 200 || site.Executions("e2") != 1 {
		t.Fatalf("no object header: %d, executions %d; want it run", r.Status, site.Executions("e2"))
	}
	if n := proxytest.Metric(t, px.Registry, "hookonce_unserialized_total", "sender", "shop"); n != 1 {
		t.Errorf("hookonce_unserialized_total = %v, want 1", n)
	}
}

// The same holds for deliveries forwarded without dedupe (dedupe: off,
// amoCRM's and Bitrix24's way): serialize is all that keeps two of them
// about one order apart, so an unreadable order key is refused there too.
func TestSerializeUnreadableObjectRefusedWithoutDedupe(t *testing.T) {
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	px := proxytest.Start(t, newStore(t), site.URL, `
senders:
  - name: crm
    match: { path: /hooks/crm }
    dedupe: off
    serialize: { key: [ { header: X-Order } ] }
`)
	if r := proxytest.Post(t, px.URL+"/hooks/crm", `{"id":"c1"}`, "X-Order", "o1", "X_Order", "o2"); r.Status != http.StatusBadRequest || site.Executions("c1") != 0 {
		t.Fatalf("order header under two spellings: %d, executions %d; want 400 and none", r.Status, site.Executions("c1"))
	}
	if r := proxytest.Post(t, px.URL+"/hooks/crm", `{"id":"c1"}`, "X-Order", "o1"); r.Status != 200 || site.Executions("c1") != 1 {
		t.Fatalf("genuine delivery: %d, executions %d; want it run", r.Status, site.Executions("c1"))
	}
}

// A body of another kind than the order key reads (a form where the key
// names a JSON path) holds no order at all: the delivery runs, unserialized
// and counted, rather than being refused where the site would take it.
func TestSerializeKeyInABodyOfAnotherKind(t *testing.T) {
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	px := proxytest.Start(t, newStore(t), site.URL, `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
    serialize: { key: [ { body: order } ] }
`)
	req, err := http.NewRequest(http.MethodPost, px.URL+"/hooks/shop", strings.NewReader("order=o1"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Event-Id", "f1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || site.Executions("f1") != 1 {
		t.Fatalf("a form body under a JSON order key: %d, executions %d; want it run", resp.StatusCode, site.Executions("f1"))
	}
	if n := proxytest.Metric(t, px.Registry, "hookonce_unserialized_total", "sender", "shop"); n != 1 {
		t.Errorf("hookonce_unserialized_total = %v, want 1", n)
	}
}
