package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/cache"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

func noRecords(t *testing.T, store dedupe.Store) {
	t.Helper()
	recs, err := store.List(context.Background(), dedupe.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 0 {
		t.Fatalf("store holds %d records (first: %s/%s %s)", len(recs), recs[0].Sender, recs[0].Key, recs[0].State)
	}
}

// A body that stalls or breaks its framing is answered with the truth, never
// an empty 200 that the sender takes for "delivered" (trap 24).
func TestBodyReadFailuresAreAnswered(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, "body_timeout: 300ms\n"+shopConfig)
	addr := strings.TrimPrefix(px.URL, "http://")
	for _, tt := range []struct {
		name, raw string
		want      int
	}{
		{"stalled body", "POST /hooks/shop HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"id\":\"stall\"", http.StatusRequestTimeout},
		{"bad chunk size", "POST /hooks/shop HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{\"id\":\"c\"}\r\n0\r\n\r\n", http.StatusBadRequest},
		{"truncated chunk", "POST /hooks/shop HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n{\"id\":\"c\"}\r\n0\r\n\r\n", http.StatusRequestTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := rawRequest(t, addr, tt.raw)
			if resp.StatusCode != tt.want || !resp.Close {
				t.Fatalf("status %d close=%v, want %d and Connection: close", resp.StatusCode, resp.Close, tt.want)
			}
		})
	}
	if site.Total() != 0 {
		t.Fatalf("the site was called %d times", site.Total())
	}
	noRecords(t, store)
	if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "shop", "outcome", "bad_request"); n != 3 {
		t.Errorf("bad_request counted %v times, want 3", n)
	}
}

// Shadow mode promises "as if hookonce were absent": the site gets the very
// bytes the sender sent, over the limit too.
func TestShadowForwardsExactBytes(t *testing.T) {
	var mu sync.Mutex
	got := map[string][32]byte{}
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[r.Header.Get("X-Case")] = sha256.Sum256(b)
		mu.Unlock()
	})
	px := proxytest.Start(t, newStore(t), site.URL, `
max_body: 64KiB
senders:
  - name: shadow
    match: { path: /s }
    key: [ { header: X-Case } ]
    mode: shadow
`)
	for _, n := range []int{65535, 65536, 65537, 70000} {
		for _, chunked := range []bool{false, true} {
			body := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
			name := fmt.Sprintf("%d-chunked=%v", n, chunked)
			var rd io.Reader = bytes.NewReader(body)
			if chunked {
				rd = io.MultiReader(rd) // hides the length: sent chunked
			}
			req, _ := http.NewRequest("POST", px.URL+"/s", rd)
			req.Header.Set("X-Case", name)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			mu.Lock()
			h, ok := got[name]
			mu.Unlock()
			if !ok || h != sha256.Sum256(body) {
				t.Errorf("%s: the site got other bytes than the sender sent (seen: %v)", name, ok)
			}
		}
	}
}

// max_inflight bounds the requests held at once; past it: 503 + Retry-After.
func TestMaxInflightRefusesPastTheBound(t *testing.T) {
	release := make(chan struct{})
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hooks/shop" {
			<-release
		}
	})
	px := proxytest.Start(t, newStore(t), site.URL, "max_inflight: 2\n"+shopConfig)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); proxytest.Post(t, px.URL+"/hooks/shop", fmt.Sprintf(`{"id":"held%d"}`, i)) }()
	}
	for site.Total() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	got := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"third"}`)
	if got.Status != http.StatusServiceUnavailable || got.Header.Get("Retry-After") == "" {
		t.Errorf("third delivery: %d Retry-After %q, want 503 with Retry-After", got.Status, got.Header.Get("Retry-After"))
	}
	// A flood of refusals is counted whole but logged at most once a
	// second: it must not become a flood of log lines.
	const flood = 200
	began := time.Now()
	for i := range flood {
		if r := proxytest.Post(t, px.URL+"/hooks/shop", fmt.Sprintf(`{"id":"flood%d"}`, i)); r.Status != http.StatusServiceUnavailable {
			t.Fatalf("flood %d: %d", i, r.Status)
		}
	}
	// One line a second at most: the first, then one per second begun.
	most := 2 + int(time.Since(began)/time.Second)
	if lines := strings.Count(px.Logs.String(), `"outcome":"overloaded"`); lines < 1 || lines > most {
		t.Errorf("%d refusals logged in %d lines, want 1 to %d:\n%s", flood+1, lines, most, px.Logs.String())
	}
	// Pass-through is not bounded by it.
	if r := proxytest.Post(t, px.URL+"/elsewhere", `{}`); r.Status != 200 {
		t.Errorf("pass-through while full: %d", r.Status)
	}
	close(release)
	wg.Wait()
	if site.Executions("third") != 0 {
		t.Fatal("the refused delivery reached the site")
	}
	if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "", "outcome", "overloaded"); n != flood+1 {
		t.Errorf("overloaded counted %v, want %d", n, flood+1)
	}
	if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"third"}`); r.Status != 200 || site.Executions("third") != 1 {
		t.Errorf("after the others finished: %d, executions %d", r.Status, site.Executions("third"))
	}
}

// An empty body is as unreplayable as any other: a site that commits and
// drops the kept-alive connection runs each forward once (trap 1).
func TestEmptyBodyForwardNeverResent(t *testing.T) {
	store := newStore(t)
	var seen atomic.Int64
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Drop") == "" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		seen.Add(1)
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	})
	px := proxytest.Start(t, store, site.URL, `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
`)
	for i := range 3 {
		send(t, px.Server, "POST", "/hooks/shop", "", "X-Event-Id", fmt.Sprint("warm", i))
	}
	for i := range 5 {
		id := fmt.Sprint("empty", i)
		req, _ := http.NewRequest("POST", px.URL+"/hooks/shop", http.NoBody)
		req.Header.Set("X-Event-Id", id)
		req.Header.Set("X-Drop", "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if n := site.Executions(id); n != 1 {
			t.Fatalf("empty-body forward %d reached the site %d times, want 1", i, n)
		}
	}
	if seen.Load() != 5 {
		t.Fatalf("site committed %d times for 5 forwards", seen.Load())
	}
}

// resetSite answers each request on a connection, then resets the
// connection soon after: pooled connections die under hookonce's feet.
func resetSite(t *testing.T, execs *sync.Map) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				v, _ := execs.LoadOrStore(req.Header.Get("X-Event-Id"), new(atomic.Int64))
				v.(*atomic.Int64).Add(1)
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				time.Sleep(time.Millisecond)
				_ = c.(*net.TCPConn).SetLinger(0) // RST, not FIN
			}(conn)
		}
	}()
	return "http://" + ln.Addr().String()
}

// A pooled connection that the site reset before the request was written
// did not run the handler: that is "unreachable" (released, the sender
// retries), never an ambiguous outcome held for an operator.
func TestResetBeforeWriteIsNotAmbiguous(t *testing.T) {
	var execs sync.Map
	store := newStore(t)
	px := proxytest.Start(t, store, resetSite(t, &execs), `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
    ambiguous: hold
`)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprint("e", i)
			for try := 0; try < 5; try++ { // the sender retries a 502
				if r := send(t, px.Server, "POST", "/hooks/shop", "{}", "X-Event-Id", id); r.StatusCode != http.StatusBadGateway {
					return
				}
			}
		}()
	}
	wg.Wait()
	for i := range 50 {
		id := fmt.Sprint("e", i)
		n := int64(0)
		if v, ok := execs.Load(id); ok {
			n = v.(*atomic.Int64).Load()
		}
		rec, err := get(t, store, "shop", id)
		if err == nil && rec.State == dedupe.StateUnknown && n == 0 {
			t.Errorf("%s held as ambiguous although the site never ran it", id)
			for _, l := range strings.Split(px.Logs.String(), "\n") {
				if strings.Contains(l, `"`+id+`"`) {
					t.Log(l)
				}
			}
		}
		if n > 1 {
			t.Errorf("%s ran %d times", id, n)
		}
	}
}

// blipStore fails every Complete for a while, as a database restart does.
type blipStore struct {
	dedupe.Store
	until time.Time
	tries atomic.Int64
}

func (b *blipStore) Complete(ctx context.Context, sender, key, owner string, resp dedupe.Response, att dedupe.Attempt) error {
	b.tries.Add(1)
	if time.Now().Before(b.until) {
		return fmt.Errorf("complete: %w", dedupe.ErrUnavailable)
	}
	return b.Store.Complete(ctx, sender, key, owner, resp, att)
}

// Storing the answer outlasts a store blip of a few seconds: the heartbeat
// keeps the lease, and the answer is stored once the store is back.
func TestCompleteOutlastsAStoreBlip(t *testing.T) {
	store := &blipStore{Store: newStore(t), until: time.Now().Add(1500 * time.Millisecond)}
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, shopConfig) // lease 3s
	if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"blip"}`); r.Status != 200 {
		t.Fatalf("status %d", r.Status)
	}
	rec, err := get(t, store, "shop", "blip")
	if err != nil || rec.State != dedupe.StateDone {
		t.Fatalf("answer not stored across the blip: %+v %v (tries %d)", rec, err, store.tries.Load())
	}
	if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"blip"}`); !r.Replayed() || site.Executions("blip") != 1 {
		t.Fatalf("repeat: replayed=%v executions=%d", r.Replayed(), site.Executions("blip"))
	}
	if store.tries.Load() < 3 {
		t.Fatalf("Complete tried %d times", store.tries.Load())
	}
}

// Past the lease the answer is given up, logged and counted.
func TestCompleteGivesUpAtTheLease(t *testing.T) {
	store := &blipStore{Store: newStore(t), until: time.Now().Add(time.Hour)}
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, strings.Replace(shopConfig, "lease: 3s", "lease: 1s", 1))
	start := time.Now()
	proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"gone"}`)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("gave up after %s", took)
	}
	if !strings.Contains(px.Logs.String(), "answer not stored before the lease ran out") {
		t.Fatal("not logged")
	}
	if n := proxytest.Metric(t, px.Registry, "hookonce_answers_not_stored_total"); n != 1 {
		t.Fatalf("hookonce_answers_not_stored_total = %v", n)
	}
}

// raceStore makes the heartbeat's renewal lose the race against the
// delivery's own completion: Complete waits until a Renew has started, and
// that Renew reaches the store only after Complete has committed.
type raceStore struct {
	dedupe.Store
	renewing chan struct{} // closed when the first Renew starts
	once     sync.Once
	stored   chan struct{} // closed when Complete has committed
}

func (r *raceStore) Renew(ctx context.Context, sender, key, owner string, lease time.Duration) error {
	r.once.Do(func() { close(r.renewing) })
	<-r.stored
	return r.Store.Renew(ctx, sender, key, owner, lease)
}

func (r *raceStore) Complete(ctx context.Context, sender, key, owner string, resp dedupe.Response, att dedupe.Attempt) error {
	<-r.renewing
	defer close(r.stored)
	return r.Store.Complete(ctx, sender, key, owner, resp, att)
}

// A renewal that lands after the delivery stored its own answer finds the
// claim ended by its owner: that is not a lost claim, and must not page
// anyone as one.
func TestRenewAfterOwnCompleteIsNotALostClaim(t *testing.T) {
	store := &raceStore{Store: newStore(t), renewing: make(chan struct{}), stored: make(chan struct{})}
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, strings.Replace(shopConfig, "lease: 3s", "lease: 1s", 1))
	if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"race"}`); r.Status != 200 {
		t.Fatalf("status %d", r.Status)
	}
	rec, err := get(t, store, "shop", "race")
	if err != nil || rec.State != dedupe.StateDone {
		t.Fatalf("record %+v %v", rec, err)
	}
	// The heartbeat has had its answer by the time it is stopped.
	if logs := px.Logs.String(); strings.Contains(logs, "claim lost") {
		t.Fatalf("own completion reported as a lost claim:\n%s", logs)
	}
}

// claimCounter counts the Claim calls that reach the store under the
// replay cache.
type claimCounter struct {
	dedupe.Store
	claims atomic.Int64
}

func (c *claimCounter) Claim(ctx context.Context, r dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, r)
}

// Repeats answered from the replay cache make no store call, and their
// hits are still counted on the record (batched, off the request path).
func TestReplayCacheHitsAreCounted(t *testing.T) {
	under := &claimCounter{Store: newStore(t)}
	store := cache.New(under, cache.Options{})
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, shopConfig)
	if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"hot"}`); r.Status != 200 {
		t.Fatalf("first: %d", r.Status)
	}
	claims := under.claims.Load()
	const repeats = 20
	for range repeats {
		if r := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"hot"}`); !r.Replayed() {
			t.Fatalf("repeat not replayed: %d", r.Status)
		}
	}
	// The first repeat may still ask the store (it fills the cache).
	if n := under.claims.Load() - claims; n > 1 {
		t.Errorf("%d repeats made %d store claims, want at most 1", repeats, n)
	}
	if site.Executions("hot") != 1 {
		t.Fatalf("executions %d", site.Executions("hot"))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec, err := get(t, under, "shop", "hot")
		if err == nil && rec.Hits == repeats {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hits = %d (%v), want %d", rec.Hits, err, repeats)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
