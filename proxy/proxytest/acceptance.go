package proxytest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// AcceptanceConfig is the sender the protocol drives: key in the JSON
// body's "id", everything else at its defaults.
const AcceptanceConfig = `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
    wait_timeout: 20s
`

// acceptanceSite answers like a shop's webhook handler: ids starting with
// "fail-once-" fail with 500 the first time, "slow-" take 300ms.
func acceptanceSite() http.HandlerFunc {
	var mu sync.Mutex
	failed := map[string]bool{}
	return func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(r.Body)
		id := EventID(r, buf.Bytes())
		if strings.HasPrefix(id, "fail-once-") {
			mu.Lock()
			first := !failed[id]
			failed[id] = true
			mu.Unlock()
			if first {
				http.Error(w, "database is locked", http.StatusInternalServerError)
				return
			}
		}
		if strings.HasPrefix(id, "slow-") {
			time.Sleep(300 * time.Millisecond)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Order", "order-for-"+id)
		w.Header().Set("Set-Cookie", "session=secret")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":"created","event":%q,"at":%d}`, id, time.Now().UnixNano())
	}
}

// RunAcceptance runs the design's acceptance protocol through real HTTP
// against newStore's backend, counting executions at the site.
func RunAcceptance(t *testing.T, newStore func(t *testing.T) dedupe.Store) {
	store := newStore(t)
	site := NewSite(t, acceptanceSite())
	px := Start(t, store, site.URL, AcceptanceConfig)
	url := px.URL + "/hooks/shop"
	run := fmt.Sprint(time.Now().UnixNano())
	get := func(key string) (dedupe.Record, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return store.Get(ctx, "shop", key)
	}

	evt := "evt-" + run
	body := fmt.Sprintf(`{"id":%q,"amount":100}`, evt)
	var first Reply
	t.Run("FirstDeliveryProcessed", func(t *testing.T) {
		first = Post(t, url, body)
		if first.Status != http.StatusCreated || first.Replayed() {
			t.Fatalf("first delivery: %d replayed=%v %s", first.Status, first.Replayed(), first.Body)
		}
		if n := site.Executions(evt); n != 1 {
			t.Fatalf("executions = %d, want 1", n)
		}
		rec, err := get(evt)
		if err != nil || rec.State != dedupe.StateDone || rec.Response == nil || !bytes.Equal(rec.Response.Body, first.Body) {
			t.Fatalf("record = %+v, %v; want done with the site's answer", rec, err)
		}
		if _, ok := rec.Response.Header["Set-Cookie"]; ok {
			t.Fatal("Set-Cookie was stored")
		}
	})

	t.Run("ExactRepeatReplayed", func(t *testing.T) {
		again := Post(t, url, body)
		if again.Status != first.Status || !bytes.Equal(again.Body, first.Body) || !again.Replayed() {
			t.Fatalf("repeat: %d replayed=%v %q; want %d %q replayed", again.Status, again.Replayed(), again.Body, first.Status, first.Body)
		}
		if again.Header.Get("X-Order") != "order-for-"+evt || again.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("replayed headers = %v", again.Header)
		}
		if again.Header.Get("Set-Cookie") != "" {
			t.Fatal("replay hands out the site's cookie")
		}
		if n := site.Executions(evt); n != 1 {
			t.Fatalf("executions after repeat = %d, want 1", n)
		}
	})

	t.Run("ChangedPayloadConflict", func(t *testing.T) {
		changed := Post(t, url, fmt.Sprintf(`{"id":%q,"amount":999}`, evt))
		if changed.Status != http.StatusUnprocessableEntity || changed.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("changed payload: %d %s %s", changed.Status, changed.Header.Get("Content-Type"), changed.Body)
		}
		if n := site.Executions(evt); n != 1 {
			t.Fatalf("executions after conflict = %d, want 1", n)
		}
		rec, err := get(evt)
		if err != nil || !bytes.Equal(rec.Response.Body, first.Body) {
			t.Fatalf("original changed: %+v, %v", rec, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cs, err := store.Conflicts(ctx, dedupe.ListFilter{Sender: "shop"})
		if err != nil || len(cs) == 0 || cs[0].Key != evt || cs[0].StoredHash != rec.PayloadHash || cs[0].ReceivedHash == rec.PayloadHash {
			t.Fatalf("conflict record = %+v, %v", cs, err)
		}
	})

	t.Run("UpstreamFailureThenRetry", func(t *testing.T) {
		id := "fail-once-" + run
		b := fmt.Sprintf(`{"id":%q}`, id)
		failed := Post(t, url, b)
		if failed.Status != http.StatusInternalServerError {
			t.Fatalf("failing site: sender saw %d, want 500", failed.Status)
		}
		if rec, err := get(id); err == nil && rec.State != dedupe.StateReleased {
			t.Fatalf("the claim was not freed after the site failed: %+v", rec)
		}
		retry := Post(t, url, b)
		if retry.Status != http.StatusCreated || retry.Replayed() {
			t.Fatalf("retry: %d replayed=%v", retry.Status, retry.Replayed())
		}
		third := Post(t, url, b)
		if !third.Replayed() || !bytes.Equal(third.Body, retry.Body) {
			t.Fatalf("third delivery not replayed: %d %s", third.Status, third.Body)
		}
		if n := site.Executions(id); n != 2 {
			t.Fatalf("site calls = %d, want 2 (the failed one and the retry)", n)
		}
	})

	t.Run("ParallelDeliveriesOneExecution", func(t *testing.T) {
		id := "slow-" + run
		b := fmt.Sprintf(`{"id":%q}`, id)
		const n = 20
		replies := make([]Reply, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range replies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				replies[i] = Post(t, url, b)
			}()
		}
		close(start)
		wg.Wait()
		if got := site.Executions(id); got != 1 {
			t.Fatalf("%d parallel deliveries: %d executions, want 1", n, got)
		}
		replayed := 0
		for i, r := range replies {
			if r.Status != replies[0].Status || !bytes.Equal(r.Body, replies[0].Body) {
				t.Fatalf("answer %d = %d %q, differs from %d %q", i, r.Status, r.Body, replies[0].Status, replies[0].Body)
			}
			if r.Replayed() {
				replayed++
			}
		}
		if replies[0].Status != http.StatusCreated || replayed != n-1 {
			t.Fatalf("status %d, %d replayed; want 201 and %d replayed", replies[0].Status, replayed, n-1)
		}
	})
}
