package proxy_test

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/providersign"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// fastRetries makes owed deliveries due again within a test's patience.
func fastRetries(o *proxy.Options) {
	o.DurableBackoff = []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	o.DurablePoll = 50 * time.Millisecond
}

const durableConfig = `
senders:
  - name: cdek
    match: { path: /hooks/cdek }
    key: [ { body: id } ]
    ack: durable
    ack_answer: { status: 200, body: "received {body.id}" }
    upstream_timeout: 10s
    lease: 3s
`

// waitUntil polls cond until it holds or d passes.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDurableSiteDown: a sender that never resends delivers 20 events once
// each while the site is down. Each is answered at once with the
// acknowledgement, and each runs exactly once at the site after it is
// back; repeats are replayed and run nothing; the gauges count up and
// back to 0.
func TestDurableSiteDown(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewStoppableSite(t, nil)
	px := proxytest.StartWith(t, store, site.URL, durableConfig, fastRetries)
	site.Stop()

	const events = 20
	var wg sync.WaitGroup
	for i := 0; i < events; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			got := proxytest.Post(t, px.URL+"/hooks/cdek", fmt.Sprintf(`{"id":"e%d","status":"DELIVERED"}`, i))
			if took := time.Since(start); got.Status != 200 || string(got.Body) != fmt.Sprintf("received e%d", i) || took > time.Second {
				t.Errorf("event e%d: %d %q after %s, want 200 received e%d within 1s", i, got.Status, got.Body, took, i)
			}
		}()
	}
	wg.Wait()
	if n := site.Total(); n != 0 {
		t.Fatalf("site ran %d times while down", n)
	}
	waitUntil(t, 3*time.Second, "pending gauge counts 20", func() bool {
		return proxytest.Metric(t, px.Registry, "hookonce_pending_deliveries", "sender", "cdek") == events
	})
	// The oldest's age comes with the store's recount (every 5 polls).
	waitUntil(t, 3*time.Second, "oldest pending aged", func() bool {
		return proxytest.Metric(t, px.Registry, "hookonce_oldest_pending_seconds", "sender", "cdek") > 0
	})

	site.Start()
	waitUntil(t, 10*time.Second, "every event run at the site", func() bool { return site.Total() >= events })
	time.Sleep(500 * time.Millisecond) // any second run would come now
	for i := 0; i < events; i++ {
		if n := site.Executions(fmt.Sprintf("e%d", i)); n != 1 {
			t.Fatalf("event e%d ran %d times", i, n)
		}
	}
	// A repeat (a lost answer) is answered as before, and runs nothing.
	got := proxytest.Post(t, px.URL+"/hooks/cdek", `{"id":"e3","status":"DELIVERED"}`)
	if got.Status != 200 || !got.Replayed() {
		t.Fatalf("repeat: %d replayed=%v", got.Status, got.Replayed())
	}
	if n := site.Executions("e3"); n != 1 {
		t.Fatalf("repeat ran the handler: %d", n)
	}
	rec, err := get(t, store, "cdek", "e3")
	if err != nil || rec.State != dedupe.StateDone || rec.Pending != nil || rec.LastAttempt().By != dedupe.AttemptByDurable {
		t.Fatalf("record after delivery: %+v (pending %+v), %v", rec.State, rec.Pending, err)
	}
	waitUntil(t, 3*time.Second, "pending gauge back to 0", func() bool {
		return proxytest.Metric(t, px.Registry, "hookonce_pending_deliveries", "sender", "cdek") == 0
	})
	if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "cdek", "outcome", proxy.OutcomeAccepted); n != events {
		t.Fatalf("accepted = %v, want %d", n, events)
	}
}

// TestDurableAckAfter: with ack_after 1s and a handler taking 6s, the
// sender has its answer well before the handler ends, a retry meanwhile
// runs nothing, and the handler runs once.
func TestDurableAckAfter(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(6 * time.Second)
		io.WriteString(w, "done")
	})
	px := proxytest.StartWith(t, store, site.URL, strings.Replace(durableConfig, "ack: durable", "ack: durable\n    ack_after: 1s", 1), fastRetries)

	start := time.Now()
	got := proxytest.Post(t, px.URL+"/hooks/cdek", `{"id":"slow"}`)
	if took := time.Since(start); got.Status != 200 || string(got.Body) != "received slow" || took > 2500*time.Millisecond {
		t.Fatalf("answer %d %q after %s, want the acknowledgement within 2.5s", got.Status, got.Body, took)
	}
	time.Sleep(3*time.Second - time.Since(start))
	if got := proxytest.Post(t, px.URL+"/hooks/cdek", `{"id":"slow"}`); got.Status != 200 || !got.Replayed() {
		t.Fatalf("retry at 3s: %d replayed=%v", got.Status, got.Replayed())
	}
	waitUntil(t, 8*time.Second, "the handler finished", func() bool {
		rec, err := get(t, store, "cdek", "slow")
		return err == nil && rec.Pending == nil
	})
	time.Sleep(300 * time.Millisecond)
	if n := site.Executions("slow"); n != 1 {
		t.Fatalf("handler ran %d times", n)
	}
	// Exact repeats get what the sender got, the acknowledgement, also
	// once the site has taken the event (its answer is in the attempt).
	if got := proxytest.Post(t, px.URL+"/hooks/cdek", `{"id":"slow"}`); string(got.Body) != "received slow" || !got.Replayed() {
		t.Fatalf("repeat after delivery = %q, want the acknowledgement the sender got", got.Body)
	}
	if rec, err := get(t, store, "cdek", "slow"); err != nil || rec.LastAttempt().Status != 200 || rec.LastAttempt().By != dedupe.AttemptByDurable {
		t.Fatalf("the site's answer in the attempt: %+v %v", rec.LastAttempt(), err)
	}
}

// TestDurableAckAfterSiteAnswers: within ack_after the sender gets the
// site's own answer, a success as a refusal.
func TestDurableAckAfterSiteAnswers(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "bad") {
			w.WriteHeader(http.StatusUnprocessableEntity)
			io.WriteString(w, "unknown order")
			return
		}
		io.WriteString(w, "site says ok")
	})
	// final_statuses 2xx, as for a sender that retries anything else: a
	// 4xx is the site refusing the delivery, not a final answer.
	px := proxytest.StartWith(t, store, site.URL, strings.Replace(durableConfig, "ack: durable", "ack: durable\n    ack_after: 2s\n    final_statuses: 2xx", 1), fastRetries)
	if got := proxytest.Post(t, px.URL+"/hooks/cdek", `{"id":"good"}`); got.Status != 200 || string(got.Body) != "site says ok" || got.Replayed() {
		t.Fatalf("fast site: %d %q", got.Status, got.Body)
	}
	if got := proxytest.Post(t, px.URL+"/hooks/cdek", `{"id":"good"}`); string(got.Body) != "site says ok" || !got.Replayed() {
		t.Fatalf("repeat: %q replayed=%v", got.Body, got.Replayed())
	}
	// A refusal is given up at once (never retried for retry_for) and
	// handed to the sender; the event stays, released, to redeliver.
	if got := proxytest.Post(t, px.URL+"/hooks/cdek", `{"id":"bad"}`); got.Status != http.StatusUnprocessableEntity || string(got.Body) != "unknown order" {
		t.Fatalf("refused: %d %q", got.Status, got.Body)
	}
	time.Sleep(800 * time.Millisecond)
	if n := site.Executions("bad"); n != 1 {
		t.Fatalf("refused delivery tried %d times", n)
	}
	rec, err := get(t, store, "cdek", "bad")
	if err != nil || rec.State != dedupe.StateReleased || rec.Pending != nil || rec.LastAttempt().Status != http.StatusUnprocessableEntity {
		t.Fatalf("refused record: %+v %v", rec, err)
	}
	if n := site.Executions("good"); n != 1 {
		t.Fatalf("good ran %d times", n)
	}
}

// TestDurableSiteFailsThenSucceeds: a site that fails each event 3 times
// before it takes it runs each once, in the background.
func TestDurableSiteFailsThenSucceeds(t *testing.T) {
	store := newStore(t)
	var mu sync.Mutex
	applied := map[string]int{}
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if proxytest.CallNumber(r) <= 3 {
			http.Error(w, "database is locked", http.StatusInternalServerError)
			return
		}
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		applied[string(body)]++
		mu.Unlock()
		io.WriteString(w, "ok")
	})
	px := proxytest.StartWith(t, store, site.URL, durableConfig, fastRetries)
	const events = 5
	for i := 0; i < events; i++ {
		if got := proxytest.Post(t, px.URL+"/hooks/cdek", fmt.Sprintf(`{"id":"f%d"}`, i)); got.Status != 200 {
			t.Fatalf("f%d: %d", i, got.Status)
		}
	}
	waitUntil(t, 10*time.Second, "every event applied", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(applied) == events
	})
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for body, n := range applied {
		if n != 1 {
			t.Fatalf("%s applied %d times", body, n)
		}
	}
	for i := 0; i < events; i++ {
		if n := site.Executions(fmt.Sprintf("f%d", i)); n != 4 {
			t.Fatalf("f%d called %d times, want 3 failures and 1 success", i, n)
		}
	}
	rec, err := get(t, store, "cdek", "f0")
	if err != nil || len(rec.Attempts) != 4 || rec.Pending != nil {
		t.Fatalf("record: %d attempts, pending %+v, %v", len(rec.Attempts), rec.Pending, err)
	}
}

// TestDurableRobokassaWhileSiteDown: Robokassa with ack: durable gets
// OK77 for InvId 77 while the site is down, and the site gets the
// payment, signed as Robokassa sent it, once it is back.
func TestDurableRobokassaWhileSiteDown(t *testing.T) {
	t.Setenv("ROBO_PASS2", "robo-password-2")
	store := newStore(t)
	var paid atomic.Int32
	site := proxytest.NewStoppableSite(t, func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if providersign.Robokassa(md5.New, "robo-password-2", r.PostForm) == r.PostForm.Get("SignatureValue") {
			paid.Add(1)
			io.WriteString(w, "OK"+r.PostForm.Get("InvId"))
			return
		}
		io.WriteString(w, "bad sign")
	})
	px := proxytest.StartWith(t, store, site.URL, `
senders:
  - name: robokassa
    preset: robokassa
    match: { path: /bitrix/tools/sale_ps_result.php }
    signature: { secret_env: ROBO_PASS2 }
    ack: durable
`, fastRetries)
	site.Stop()
	f := url.Values{"OutSum": {"1500.000000"}, "InvId": {"77"}, "SHP_HANDLER": {"ROBOXCHANGE"}}
	f.Set("SignatureValue", providersign.Robokassa(md5.New, "robo-password-2", f))
	got := proxytest.Post(t, px.URL+"/bitrix/tools/sale_ps_result.php", f.Encode(), "Content-Type", "application/x-www-form-urlencoded")
	if got.Status != 200 || string(got.Body) != "OK77" {
		t.Fatalf("answer while the site is down: %d %q, want OK77", got.Status, got.Body)
	}
	site.Start()
	waitUntil(t, 5*time.Second, "the payment reached the site", func() bool { return paid.Load() == 1 })
	time.Sleep(300 * time.Millisecond)
	if n := site.Total(); n != 1 || paid.Load() != 1 {
		t.Fatalf("site calls %d, paid %d", n, paid.Load())
	}
}

// TestDurableGivesUp: past retry_for the delivery is given up, becomes a
// released (unretried) event with its request kept, and an operator's
// redelivery runs it once.
func TestDurableGivesUp(t *testing.T) {
	store := newStore(t)
	var fail atomic.Bool
	fail.Store(true)
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	})
	var notices []proxy.Notice
	var nmu sync.Mutex
	px := proxytest.StartWith(t, store, site.URL, strings.Replace(durableConfig, "ack: durable", "ack: durable\n    retry_for: 1m", 1), func(o *proxy.Options) {
		fastRetries(o)
		o.DurableBackoff = []time.Duration{100 * time.Millisecond, time.Second, time.Minute}
		o.Notice = func(n proxy.Notice) { nmu.Lock(); notices = append(notices, n); nmu.Unlock() }
	})
	if got := proxytest.Post(t, px.URL+"/hooks/cdek", `{"id":"late"}`); got.Status != 200 {
		t.Fatalf("answer: %d", got.Status)
	}
	// While it is owed, an operator's redelivery would run beside a try.
	if _, err := px.Proxy.Redeliver(context.Background(), "cdek", "late", true); !errors.Is(err, proxy.ErrOwed) {
		t.Fatalf("redeliver while owed: %v, want ErrOwed", err)
	}
	// Tries 1–3 fail; the next would come after retry_for: given up.
	waitUntil(t, 5*time.Second, "given up", func() bool {
		rec, err := get(t, store, "cdek", "late")
		return err == nil && rec.State == dedupe.StateReleased
	})
	if n := site.Executions("late"); n != 3 {
		t.Fatalf("tries = %d, want 3", n)
	}
	nmu.Lock()
	if len(notices) != 1 || notices[0].What != proxy.NoticeGivenUp || notices[0].Key != "late" {
		t.Fatalf("notices = %+v", notices)
	}
	nmu.Unlock()
	// Unretried at once: no sender's retry will come.
	un, err := px.Proxy.Unretried(context.Background(), "cdek", time.Now())
	if err != nil || len(un) != 1 || un[0].Key != "late" {
		t.Fatalf("unretried = %v, %v", un, err)
	}
	fail.Store(false)
	res, err := px.Proxy.Redeliver(context.Background(), "cdek", "late", false)
	if err != nil || res.Status != 200 {
		t.Fatalf("redeliver: %+v %v", res, err)
	}
	if n := site.Executions("late"); n != 4 {
		t.Fatalf("calls after redelivery = %d, want 4", n)
	}
}

// TestDurableBacklogFull: past ack_backlog a durable sender is asked to
// retry (503 + Retry-After) and nothing is stored for it.
func TestDurableBacklogFull(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewStoppableSite(t, nil)
	px := proxytest.StartWith(t, store, site.URL, strings.Replace(durableConfig, "ack: durable", "ack: durable\n    ack_backlog: 2", 1), fastRetries)
	site.Stop()
	for i := 0; i < 2; i++ {
		if got := proxytest.Post(t, px.URL+"/hooks/cdek", fmt.Sprintf(`{"id":"b%d"}`, i)); got.Status != 200 {
			t.Fatalf("b%d: %d", i, got.Status)
		}
	}
	got := proxytest.Post(t, px.URL+"/hooks/cdek", `{"id":"b2"}`)
	if got.Status != http.StatusServiceUnavailable || got.Header.Get("Retry-After") == "" {
		t.Fatalf("past the backlog: %d Retry-After=%q", got.Status, got.Header.Get("Retry-After"))
	}
	if _, err := get(t, store, "cdek", "b2"); err == nil {
		t.Fatal("a refused delivery left a record")
	}
	site.Start()
	waitUntil(t, 5*time.Second, "the owed two delivered", func() bool { return site.Total() == 2 })
	waitUntil(t, 5*time.Second, "room again", func() bool {
		return proxytest.Post(t, px.URL+"/hooks/cdek", `{"id":"b2"}`).Status == 200
	})
	waitUntil(t, 5*time.Second, "b2 delivered", func() bool { return site.Executions("b2") == 1 })
}

// TestDurableTriesBounded: a burst answered at once does not become as
// many requests at a slow site: tries of one sender run at most 16 at a
// time, the rest queued in the store, and each event still runs once.
func TestDurableTriesBounded(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(150 * time.Millisecond)
		io.WriteString(w, "ok")
	})
	px := proxytest.StartWith(t, store, site.URL, durableConfig, fastRetries)
	const events = 60
	var wg sync.WaitGroup
	for i := 0; i < events; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := proxytest.Post(t, px.URL+"/hooks/cdek", fmt.Sprintf(`{"id":"burst%d"}`, i)); got.Status != 200 {
				t.Errorf("burst%d: %d", i, got.Status)
			}
		}()
	}
	wg.Wait()
	waitUntil(t, 15*time.Second, "every event run", func() bool { return site.Total() >= events })
	time.Sleep(300 * time.Millisecond)
	if p := site.Peak(); p > 16 {
		t.Fatalf("site peak concurrency %d, want at most 16", p)
	}
	for i := 0; i < events; i++ {
		if n := site.Executions(fmt.Sprintf("burst%d", i)); n != 1 {
			t.Fatalf("burst%d ran %d times", i, n)
		}
	}
}

// TestDurablePendingGaugeLive: hookonce_pending_deliveries counts a burst
// as it is accepted and each delivery as it ends, not only at the
// store's recount (every few polls; here never after the first): a
// drain or an operator reading 0 knows the site has everything.
func TestDurablePendingGaugeLive(t *testing.T) {
	store := newStore(t)
	gate := make(chan struct{})
	var release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		<-gate
		io.WriteString(w, "ok")
	})
	px := proxytest.StartWith(t, store, site.URL, durableConfig, func(o *proxy.Options) {
		fastRetries(o)
		o.DurablePoll = time.Hour // the recount runs once, at the start
	})
	t.Cleanup(open) // a failure before the release must not leave tries hung
	// The start's recount done, before any event is owed: a recount that
	// overlaps the burst may count a delivery written while it counted
	// twice (or a settled one not at all) until the next recount, which
	// here never comes. The gauge's series appears with the recount.
	waitUntil(t, 3*time.Second, "the start's recount", func() bool {
		mfs, err := px.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "hookonce_pending_deliveries" && len(mf.GetMetric()) > 0 {
				return true
			}
		}
		return false
	})
	const events = 24 // more than the 16 tries at once: some queued
	var wg sync.WaitGroup
	for i := 0; i < events; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := proxytest.Post(t, px.URL+"/hooks/cdek", fmt.Sprintf(`{"id":"g%d"}`, i)); got.Status != 200 {
				t.Errorf("g%d: %d", i, got.Status)
			}
		}()
	}
	wg.Wait()
	if n := proxytest.Metric(t, px.Registry, "hookonce_pending_deliveries", "sender", "cdek"); n != events {
		t.Fatalf("pending gauge right after %d accepted = %v", events, n)
	}
	open()
	waitUntil(t, 10*time.Second, "every event run and the gauge at 0", func() bool {
		return site.Total() >= events && proxytest.Metric(t, px.Registry, "hookonce_pending_deliveries", "sender", "cdek") == 0
	})
	for i := 0; i < events; i++ {
		if n := site.Executions(fmt.Sprintf("g%d", i)); n != 1 {
			t.Fatalf("g%d ran %d times", i, n)
		}
	}
	if age := proxytest.Metric(t, px.Registry, "hookonce_oldest_pending_seconds", "sender", "cdek"); age != 0 {
		t.Fatalf("oldest pending %v s with none owed", age)
	}
}

// TestDurableSenderRemoved: a sender taken out of the config while
// deliveries are owed is said so in the log (nothing tries them now).
func TestDurableSenderRemoved(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewStoppableSite(t, nil)
	px := proxytest.StartWith(t, store, site.URL, durableConfig, fastRetries)
	site.Stop()
	if got := proxytest.Post(t, px.URL+"/hooks/cdek", `{"id":"orphan"}`); got.Status != 200 {
		t.Fatalf("answer: %d", got.Status)
	}
	c, err := contract.Parse([]byte("senders:\n  - name: other\n    match: { path: /other }\n    key: [ { body: id } ]\n    ack: durable\n"), "reload.yaml")
	if err != nil {
		t.Fatal(err)
	}
	px.Proxy.SetContract(c)
	waitUntil(t, 5*time.Second, "the orphaned deliveries logged", func() bool {
		return strings.Contains(px.Logs.String(), "no longer in the config")
	})
	site.Start()
	time.Sleep(500 * time.Millisecond)
	if n := site.Total(); n != 0 {
		t.Fatalf("a removed sender's delivery ran %d times", n)
	}
}
