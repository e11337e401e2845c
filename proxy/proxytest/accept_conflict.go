package proxytest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy"
)

// AcceptConfig drives RunAcceptConflict: shop keeps requests (so its
// conflicts can be accepted), plain does not, form reads a PHP form,
// watch runs in shadow mode, and dup answers a changed payload with the
// original's answer (changed_payload: duplicate).
const AcceptConfig = `
defaults:
  store_request_body: true
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
  - name: plain
    match: { path: /hooks/plain }
    key: [ { body: id } ]
    store_request_body: false
  - name: form
    match: { path: /hooks/form }
    key: [ { form: OrderId }, { form: Status } ]
  - name: watch
    match: { path: /hooks/watch }
    key: [ { body: id } ]
    mode: shadow
  - name: dup
    match: { path: /hooks/dup }
    key: [ { body: id } ]
    changed_payload: duplicate
`

// RunAcceptConflict proves, counting executions at a real site, that a
// refused changed payload is kept with what changed, and that accepting
// it runs it at the site once, under its own Idempotency-Key
// (SENDER:KEY:accepted-ID): a second accept, and any number of
// concurrent ones, add no execution; a conflict whose payload was not
// kept, or that shadow mode forwarded already, is refused and runs
// nothing. A payload is accepted once: its retries are answered from the
// accepted copy (replayed, never a new conflict), and an accept of
// another conflict with the same payload is refused naming the first. A
// changed payload answered as a duplicate (changed_payload: duplicate)
// runs nothing, is recorded with what changed, and is accepted the same
// way, once.
func RunAcceptConflict(t *testing.T, newStore func(t *testing.T) dedupe.Store) {
	store := newStore(t)
	site := NewSite(t, nil)
	px := Start(t, store, site.URL, AcceptConfig)
	run := fmt.Sprint(time.Now().UnixNano())
	ctx := func() context.Context {
		c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		t.Cleanup(cancel)
		return c
	}
	conflicts := func(t *testing.T, sender, key string) []dedupe.Conflict {
		t.Helper()
		cs, err := store.Conflicts(ctx(), dedupe.ListFilter{Sender: sender, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	// refused delivers an event, then a changed copy that is refused.
	refused := func(t *testing.T, sender, evt string) {
		t.Helper()
		url := px.URL + "/hooks/" + sender
		if r := Post(t, url, fmt.Sprintf(`{"id":%q,"amount":100}`, evt)); r.Status != http.StatusOK {
			t.Fatalf("first delivery: %d %s", r.Status, r.Body)
		}
		if r := Post(t, url, fmt.Sprintf(`{"id":%q,"amount":999}`, evt)); r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("changed payload: %d %s, want 422", r.Status, r.Body)
		}
		if n := site.Executions(evt); n != 1 {
			t.Fatalf("executions before accept = %d, want 1", n)
		}
	}

	t.Run("AcceptedOnce", func(t *testing.T) {
		evt := "evt-" + run
		refused(t, "shop", evt)
		cs := conflicts(t, "shop", evt)
		if len(cs) != 1 || !cs[0].Kept() || cs[0].DiffKind != dedupe.DiffJSON || fmt.Sprint(cs[0].ChangedPaths) != "[amount]" ||
			!strings.Contains(string(cs[0].Body), "999") || cs[0].Acceptable() != nil {
			t.Fatalf("conflict = %+v, want the refused payload kept, [amount] changed, acceptable", cs)
		}
		acc, err := px.Proxy.Accept(ctx(), "shop", evt, "", "tester")
		if err != nil || acc.Outcome != "processed" || acc.Status != http.StatusOK {
			t.Fatalf("Accept = %+v, %v; want processed, 200", acc, err)
		}
		if n := site.Executions(evt); n != 2 {
			t.Fatalf("executions after accept = %d, want 2 (the original and the accepted copy)", n)
		}
		wantKey := "shop:" + evt + ":accepted-" + cs[0].ID
		if got := site.LastHeader(evt).Get("Idempotency-Key"); got != wantKey {
			t.Fatalf("accepted copy's Idempotency-Key = %q, want %q", got, wantKey)
		}
		if rec, err := store.Get(ctx(), "shop", dedupe.AcceptedKey(evt, cs[0].ID)); err != nil || rec.State != dedupe.StateDone ||
			rec.LastAttempt().By != dedupe.AttemptByOperator {
			t.Fatalf("accepted copy's record = %+v, %v; want done, by the operator", rec, err)
		}
		if rec, err := store.Get(ctx(), "shop", evt); err != nil || rec.PayloadHash != cs[0].StoredHash {
			t.Fatalf("original record changed: %+v, %v", rec, err)
		}
		again, err := px.Proxy.Accept(ctx(), "shop", evt, "", "someone-else")
		if !errors.Is(err, dedupe.ErrAccepted) || again.Conflict.AcceptedBy != "tester" {
			t.Fatalf("second Accept = %+v, %v; want ErrAccepted, accepted by tester", again, err)
		}
		if n := site.Executions(evt); n != 2 {
			t.Fatalf("executions after a second accept = %d, want still 2", n)
		}
		if cs := conflicts(t, "shop", evt); len(cs) != 1 || !cs[0].Accepted() || cs[0].AcceptedBy != "tester" {
			t.Fatalf("conflict after accept = %+v", cs)
		}
	})

	t.Run("ConcurrentAcceptsRunOnce", func(t *testing.T) {
		evt := "race-" + run
		refused(t, "shop", evt)
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, refusedN := 0, 0
		for i := 0; i < 6; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := px.Proxy.Accept(ctx(), "shop", evt, "", "tester")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case errors.Is(err, dedupe.ErrAccepted):
					refusedN++
				default:
					t.Errorf("Accept: %v", err)
				}
			}()
		}
		wg.Wait()
		if won != 1 || refusedN != 5 {
			t.Fatalf("6 concurrent accepts: %d ran, %d refused; want 1 and 5", won, refusedN)
		}
		if n := site.Executions(evt); n != 2 {
			t.Fatalf("executions after concurrent accepts = %d, want 2", n)
		}
	})

	t.Run("InterruptedAcceptResumed", func(t *testing.T) {
		evt := "cut-" + run
		refused(t, "shop", evt)
		// A serve marked it accepted and stopped before forwarding it.
		if _, err := store.AcceptConflict(ctx(), "shop", evt, "", "stopped-serve"); err != nil {
			t.Fatal(err)
		}
		if _, err := px.Proxy.Accept(ctx(), "shop", evt, "", "tester"); !errors.Is(err, dedupe.ErrAccepted) {
			t.Fatalf("Accept right after another marked it: %v, want ErrAccepted (that accept may still be forwarding)", err)
		}
		if n := site.Executions(evt); n != 1 {
			t.Fatalf("executions = %d, want 1", n)
		}
		old := proxy.AcceptResumeAfter
		proxy.AcceptResumeAfter = 0
		defer func() { proxy.AcceptResumeAfter = old }()
		if acc, err := px.Proxy.Accept(ctx(), "shop", evt, "", "tester"); err != nil || acc.Outcome != "processed" {
			t.Fatalf("Accept of an interrupted accept = %+v, %v; want it resumed, processed", acc, err)
		}
		if _, err := px.Proxy.Accept(ctx(), "shop", evt, "", "tester"); !errors.Is(err, dedupe.ErrAccepted) {
			t.Fatalf("Accept once the copy ran: %v, want ErrAccepted", err)
		}
		if n := site.Executions(evt); n != 2 {
			t.Fatalf("executions after resuming = %d, want 2", n)
		}
	})

	t.Run("NotKeptRefused", func(t *testing.T) {
		evt := "plain-" + run
		refused(t, "plain", evt)
		cs := conflicts(t, "plain", evt)
		if len(cs) != 1 || cs[0].Request != nil || cs[0].Body != nil {
			t.Fatalf("conflict of a sender without store_request_body kept a payload: %+v", cs)
		}
		if _, err := px.Proxy.Accept(ctx(), "plain", evt, "", "tester"); !errors.Is(err, dedupe.ErrNotAcceptable) {
			t.Fatalf("Accept without a kept payload: %v, want ErrNotAcceptable", err)
		}
		if n := site.Executions(evt); n != 1 {
			t.Fatalf("executions after a refused accept = %d, want 1", n)
		}
	})

	t.Run("FormFieldsChanged", func(t *testing.T) {
		evt := "form-" + run
		send := func(amount string) Reply {
			req, err := http.NewRequest(http.MethodPost, px.URL+"/hooks/form",
				strings.NewReader("OrderId="+evt+"&Status=CONFIRMED&Amount="+amount+"&data%5Bx%5D="+amount))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Event-Id", evt)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return Reply{Status: resp.StatusCode}
		}
		if r := send("100"); r.Status != http.StatusOK {
			t.Fatalf("first form delivery: %d", r.Status)
		}
		if r := send("200"); r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("changed form: %d, want 422", r.Status)
		}
		cs := conflicts(t, "form", evt+":CONFIRMED")
		if len(cs) != 1 || cs[0].DiffKind != dedupe.DiffForm || fmt.Sprint(cs[0].ChangedPaths) != "[Amount data[x]]" {
			t.Fatalf("form conflict = %+v, want form fields [Amount data[x]]", cs)
		}
		if _, err := px.Proxy.Accept(ctx(), "form", evt+":CONFIRMED", "", "tester"); err != nil {
			t.Fatalf("Accept of a form conflict: %v", err)
		}
		if n := site.Executions(evt); n != 2 {
			t.Fatalf("executions after accepting the form = %d, want 2", n)
		}
	})

	t.Run("ShadowKeptNotAccepted", func(t *testing.T) {
		evt := "watch-" + run
		url := px.URL + "/hooks/watch"
		Post(t, url, fmt.Sprintf(`{"id":%q,"amount":100}`, evt))
		Post(t, url, fmt.Sprintf(`{"id":%q,"amount":999}`, evt))
		if n := site.Executions(evt); n != 2 {
			t.Fatalf("shadow mode: executions = %d, want 2 (everything forwarded)", n)
		}
		cs := conflicts(t, "watch", evt)
		if len(cs) != 1 || !cs[0].Shadow || !strings.Contains(string(cs[0].Body), "999") {
			t.Fatalf("shadow conflict = %+v, want the would-be conflict with its payload", cs)
		}
		if rec, err := store.Get(ctx(), "watch", evt); err != nil || !strings.Contains(string(rec.RequestBody), "100") {
			t.Fatalf("shadow original = %+v, %v; want its payload kept beside the conflict", rec, err)
		}
		if _, err := px.Proxy.Accept(ctx(), "watch", evt, "", "tester"); !errors.Is(err, dedupe.ErrNotAcceptable) {
			t.Fatalf("Accept of a shadow conflict: %v, want ErrNotAcceptable", err)
		}
		if n := site.Executions(evt); n != 2 {
			t.Fatalf("executions after refusing a shadow accept = %d, want 2", n)
		}
	})

	// changed sends evt's changed payload to sender and checks how it is
	// answered: want the status, replayed whether from the store.
	changed := func(t *testing.T, sender, evt string, want int, replayed bool) Reply {
		t.Helper()
		r := Post(t, px.URL+"/hooks/"+sender, fmt.Sprintf(`{"id":%q,"amount":999}`, evt))
		if r.Status != want || r.Replayed() != replayed {
			t.Fatalf("changed payload to %s: %d replayed=%v %s; want %d replayed=%v", sender, r.Status, r.Replayed(), r.Body, want, replayed)
		}
		return r
	}

	t.Run("OncePerPayload", func(t *testing.T) {
		evt := "once-" + run
		refused(t, "shop", evt)
		changed(t, "shop", evt, http.StatusUnprocessableEntity, false) // the sender's retry, before any accept
		cs := conflicts(t, "shop", evt)
		if len(cs) != 2 || cs[0].ReceivedHash != cs[1].ReceivedHash {
			t.Fatalf("conflicts = %+v, want two with one payload", cs)
		}
		acc, err := px.Proxy.Accept(ctx(), "shop", evt, cs[0].ID, "tester")
		if err != nil || acc.Outcome != "processed" {
			t.Fatalf("Accept = %+v, %v", acc, err)
		}
		// The sender retries the payload it was refused: answered from the
		// accepted copy's run, never refused again, never run again.
		for i := 0; i < 3; i++ {
			r := changed(t, "shop", evt, http.StatusOK, true)
			if !strings.Contains(string(r.Body), evt) {
				t.Fatalf("retry answered %q, want the accepted copy's stored answer", r.Body)
			}
		}
		if got := conflicts(t, "shop", evt); len(got) != 2 {
			t.Fatalf("retries of an accepted payload recorded conflicts: %d, want still 2", len(got))
		}
		// The other conflict with this payload: refused, the first named.
		again, err := px.Proxy.Accept(ctx(), "shop", evt, cs[1].ID, "someone-else")
		if !errors.Is(err, dedupe.ErrAccepted) || again.Conflict.ID != cs[0].ID || again.Conflict.AcceptedBy != "tester" ||
			!strings.Contains(err.Error(), "conflict "+cs[0].ID) || !strings.Contains(err.Error(), "tester") {
			t.Fatalf("accept of the same payload's other conflict = %+v, %v; want ErrAccepted naming conflict %s by tester", again.Conflict, err, cs[0].ID)
		}
		if n := site.Executions(evt); n != 2 {
			t.Fatalf("executions = %d, want 2: the original and the accepted payload once", n)
		}
		// The original's own retries are still its replays.
		if r := Post(t, px.URL+"/hooks/shop", fmt.Sprintf(`{"id":%q,"amount":100}`, evt)); r.Status != http.StatusOK || !r.Replayed() {
			t.Fatalf("original's retry: %d replayed=%v", r.Status, r.Replayed())
		}
		// A third payload under the key is a conflict of its own.
		if r := Post(t, px.URL+"/hooks/shop", fmt.Sprintf(`{"id":%q,"amount":5}`, evt)); r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("a third payload: %d, want 422", r.Status)
		}
		if n := site.Executions(evt); n != 2 {
			t.Fatalf("executions = %d, want 2", n)
		}
	})

	t.Run("AnsweredDuplicateRecordedAcceptedOnce", func(t *testing.T) {
		evt := "dup-" + run
		url := px.URL + "/hooks/dup"
		if r := Post(t, url, fmt.Sprintf(`{"id":%q,"amount":100}`, evt)); r.Status != http.StatusOK {
			t.Fatalf("first delivery: %d %s", r.Status, r.Body)
		}
		changed(t, "dup", evt, http.StatusOK, true)
		changed(t, "dup", evt, http.StatusOK, true)
		if n := site.Executions(evt); n != 1 {
			t.Fatalf("executions of a changed payload answered as a duplicate = %d, want 1 (the original)", n)
		}
		cs := conflicts(t, "dup", evt)
		if len(cs) != 2 || !cs[0].AnsweredDuplicate || cs[0].DiffKind != dedupe.DiffJSON || fmt.Sprint(cs[0].ChangedPaths) != "[amount]" ||
			cs[0].Acceptable() != nil {
			t.Fatalf("answered-as-duplicate records = %+v, want two, [amount] changed, acceptable", cs)
		}
		acc, err := px.Proxy.Accept(ctx(), "dup", evt, "", "tester")
		if err != nil || acc.Outcome != "processed" || acc.Status != http.StatusOK {
			t.Fatalf("Accept = %+v, %v; want processed, 200", acc, err)
		}
		if n := site.Executions(evt); n != 2 {
			t.Fatalf("executions after accept = %d, want 2", n)
		}
		if _, err := px.Proxy.Accept(ctx(), "dup", evt, cs[1].ID, "someone-else"); !errors.Is(err, dedupe.ErrAccepted) {
			t.Fatalf("second accept of the same payload: %v, want ErrAccepted", err)
		}
		changed(t, "dup", evt, http.StatusOK, true)
		if n := site.Executions(evt); n != 2 {
			t.Fatalf("executions after a second accept and a retry = %d, want 2", n)
		}
		if got := conflicts(t, "dup", evt); len(got) != 2 {
			t.Fatalf("a retry of the accepted payload was recorded again: %d records, want 2", len(got))
		}
	})
}
