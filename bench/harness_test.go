package bench_test

// The harness every backend's benchmark shares: the load generator
// (events/s, p50/p99), the trivial site, the proxy in front of it, and the
// new/duplicate × 1/8/32 senders runs at the store and through the proxy.
// Each backend file keeps only its server setup and its own references.
//
//	go test ./bench -run '^$' -bench 'SQLite|Postgres|Redis' -benchtime 2s -timeout 20m

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy"
)

// senders are the concurrency levels every run is measured at.
var senders = []int{1, 8, 32}

// run numbers the runs, so that no two runs (even on two rigs sharing one
// database) use the same sender or event ids.
var run atomic.Int64

const benchConfig = `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
`

// storedResp is the answer the store-level runs complete with.
var storedResp = dedupe.Response{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"ok":true}`)}

// load runs op b.N times spread over conc goroutines and reports events/s
// and the p50/p99 latency of one op.
func load(b *testing.B, conc int, op func(i int64) error) {
	b.Helper()
	var next atomic.Int64
	lat := make([][]time.Duration, conc)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	b.ResetTimer()
	start := time.Now()
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t0 := time.Now()
				if err := op(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := firstErr.Load().(error); err != nil {
		b.Fatal(err)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[int(float64(len(all)-1)*p)].Microseconds())
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(0, "ns/op") // wall time per op is meaningless under concurrency
}

// post sends one webhook and checks the answer.
func post(c *http.Client, url, id string, wantReplay bool) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(`{"type":"order.paid","amount":100}`)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Event-Id", id)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: status %d", id, resp.StatusCode)
	}
	if replayed := resp.Header.Get(proxy.ReplayHeader) == "true"; replayed != wantReplay {
		return fmt.Errorf("POST %s: replayed=%v, want %v", id, replayed, wantReplay)
	}
	return nil
}

// rig is one store with a proxy in front of a trivial site, and a client
// with enough idle connections for every sender.
type rig struct {
	store   dedupe.Store
	siteURL *url.URL
	hook    string // the proxy's webhook URL
	client  *http.Client
}

// newRig starts the trivial site and a proxy on store in front of it.
func newRig(b *testing.B, store dedupe.Store) *rig {
	b.Helper()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	b.Cleanup(site.Close)
	siteURL, err := url.Parse(site.URL)
	if err != nil {
		b.Fatal(err)
	}
	c, err := contract.Parse([]byte(benchConfig), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	px, err := proxy.New(proxy.Options{Upstream: siteURL, Contract: c, Store: store, KeepIdle: proxy.DefaultKeepIdle})
	if err != nil {
		b.Fatal(err)
	}
	pxSrv := httptest.NewServer(px)
	b.Cleanup(func() { pxSrv.Close(); _ = px.Close(context.Background()) })
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	b.Cleanup(client.CloseIdleConnections)
	return &rig{store: store, siteURL: siteURL, hook: pxSrv.URL + "/hooks/shop", client: client}
}

// runStoreAndProxy runs, at 1, 8 and 32 senders, new events and
// duplicates at the store and through the proxy, then each of refs (which
// name their own sub-benchmarks) at the same concurrency.
func (r *rig) runStoreAndProxy(b *testing.B, refs ...func(b *testing.B, conc int)) {
	for _, conc := range senders {
		b.Run(fmt.Sprintf("store/new/senders=%d", conc), func(b *testing.B) { r.storeNew(b, conc) })
		b.Run(fmt.Sprintf("store/duplicate/senders=%d", conc), func(b *testing.B) { r.storeDuplicate(b, conc) })
		b.Run(fmt.Sprintf("proxy/new/senders=%d", conc), func(b *testing.B) { r.proxyNew(b, conc) })
		b.Run(fmt.Sprintf("proxy/duplicate/senders=%d", conc), func(b *testing.B) { r.proxyDuplicate(b, conc) })
		for _, ref := range refs {
			ref(b, conc)
		}
	}
}

// storeNew: a new event at the store, Claim (new key) + Complete.
func (r *rig) storeNew(b *testing.B, conc int) {
	ctx := context.Background()
	sender := fmt.Sprintf("bench-new-%d", run.Add(1))
	load(b, conc, func(i int64) error {
		key, owner := "evt_"+strconv.FormatInt(i, 10), "o"+strconv.FormatInt(i, 10)
		res, err := r.store.Claim(ctx, dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: "h", Owner: owner, Lease: 30 * time.Second, TTL: time.Hour})
		if err != nil {
			return err
		}
		if res.Found != dedupe.Claimed {
			return fmt.Errorf("claim %s = %v", key, res.Found)
		}
		return r.store.Complete(ctx, sender, key, owner, storedResp, dedupe.Attempt{At: time.Now(), By: dedupe.AttemptBySender, Outcome: "processed", Status: 200})
	})
}

// storeDuplicate: a duplicate at the store, one Claim answered with the
// stored response.
func (r *rig) storeDuplicate(b *testing.B, conc int) {
	ctx := context.Background()
	sender := fmt.Sprintf("bench-dup-%d", run.Add(1))
	const keys = 1000
	for k := range keys {
		key := "evt_" + strconv.Itoa(k)
		if _, err := r.store.Claim(ctx, dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: "h", Owner: "o", Lease: time.Minute, TTL: time.Hour}); err != nil {
			b.Fatal(err)
		}
		if err := r.store.Complete(ctx, sender, key, "o", storedResp, dedupe.Attempt{At: time.Now(), By: dedupe.AttemptBySender, Outcome: "processed", Status: 200}); err != nil {
			b.Fatal(err)
		}
	}
	load(b, conc, func(i int64) error {
		key := "evt_" + strconv.FormatInt(i%keys, 10)
		res, err := r.store.Claim(ctx, dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: "h", Owner: "dup", Lease: time.Minute, TTL: time.Hour})
		if err != nil {
			return err
		}
		if res.Found != dedupe.Duplicate {
			return fmt.Errorf("claim %s = %v, want duplicate", key, res.Found)
		}
		return nil
	})
}

// proxyNew: a new event through the proxy, claim, forward, complete.
func (r *rig) proxyNew(b *testing.B, conc int) {
	prefix := fmt.Sprintf("new-%d-", run.Add(1))
	load(b, conc, func(i int64) error {
		return post(r.client, r.hook, prefix+strconv.FormatInt(i, 10), false)
	})
}

// proxyDuplicate: a duplicate through the proxy, replayed from the stored
// answer.
func (r *rig) proxyDuplicate(b *testing.B, conc int) {
	prefix := fmt.Sprintf("dup-%d-", run.Add(1))
	const keys = 256
	for k := range keys {
		if err := post(r.client, r.hook, prefix+strconv.Itoa(k), false); err != nil {
			b.Fatal(err)
		}
	}
	load(b, conc, func(i int64) error {
		return post(r.client, r.hook, prefix+strconv.FormatInt(i%keys, 10), true)
	})
}

// reverseProxy is the reference for the proxy runs: a bare
// httputil.ReverseProxy in front of the same site, no store. It does not
// depend on the backend, so only one backend's benchmark runs it
// (BenchmarkPostgres/reference/reverseproxy).
func (r *rig) reverseProxy(b *testing.B, conc int) {
	bare := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(r.siteURL)
		pr.SetXForwarded()
	}})
	defer bare.Close()
	b.Run(fmt.Sprintf("reference/reverseproxy/senders=%d", conc), func(b *testing.B) {
		load(b, conc, func(int64) error {
			return post(r.client, bare.URL+"/hooks/shop", "x", false)
		})
	})
}
