package bench_test

// Redis store benchmarks: new-event and duplicate throughput with p50/p99
// latency at 1, 8 and 32 concurrent senders, at the store and through the
// proxy, next to the reference a Redis client gets from the same server for
// a bare SET NX (go-redis at the same concurrency, and redis-benchmark).
//
//	go test ./bench -run '^$' -bench Redis -benchtime 2s
//
// The server runs with the append-only file on, fsync every second (what the
// README recommends), on loopback; client, proxy and server share the
// machine's cores.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/redis"
	"github.com/hookonce/hookonce/internal/redistest"
	"github.com/hookonce/hookonce/proxy"
)

const redisBenchConfig = `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
`

// redisPost sends one webhook and checks the answer.
func redisPost(c *http.Client, url, id string, wantReplay bool) error {
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

var redisSenders = []int{1, 8, 32}

// redisLoad runs op b.N times spread over conc goroutines and reports
// events/s and the p50/p99 latency of one op.
func redisLoad(b *testing.B, conc int, op func(ctx context.Context, i int64) error) {
	b.Helper()
	var next atomic.Int64
	lat := make([][]time.Duration, conc)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t0 := time.Now()
				if err := op(ctx, i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		}(g)
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
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(redisPct(all, 0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(redisPct(all, 0.99).Microseconds()), "p99-µs")
	b.ReportMetric(0, "ns/op") // wall time per op is meaningless under concurrency
}

func redisPct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted)-1)*p)]
}

func BenchmarkRedis(b *testing.B) {
	srv := redistest.Start(b, "--appendonly", "yes", "--appendfsync", "everysec")
	ctx := context.Background()
	s, err := redis.New(ctx, srv.URL()+"?pool_size=64")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	var run atomic.Int64
	resp := dedupe.Response{Status: 200, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"ok":true}`)}

	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	b.Cleanup(site.Close)
	siteURL, _ := url.Parse(site.URL)
	c, err := contract.Parse([]byte(redisBenchConfig), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	px, err := proxy.New(proxy.Options{Upstream: siteURL, Contract: c, Store: s})
	if err != nil {
		b.Fatal(err)
	}
	pxSrv := httptest.NewServer(px)
	b.Cleanup(func() { pxSrv.Close(); _ = px.Close(context.Background()) })
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	b.Cleanup(client.CloseIdleConnections)
	hook := pxSrv.URL + "/hooks/shop"

	for _, conc := range redisSenders {
		// New event, store level: Claim (new key) + Complete, two round trips.
		b.Run(fmt.Sprintf("store/new/senders=%d", conc), func(b *testing.B) {
			sender := fmt.Sprintf("bench-new-%d", run.Add(1))
			redisLoad(b, conc, func(ctx context.Context, i int64) error {
				key, owner := "evt_"+strconv.FormatInt(i, 10), "o"+strconv.FormatInt(i, 10)
				res, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: "h", Owner: owner, Lease: 30 * time.Second, TTL: time.Hour})
				if err != nil {
					return err
				}
				if res.Outcome != dedupe.Claimed {
					return fmt.Errorf("claim %s = %v", key, res.Outcome)
				}
				return s.Complete(ctx, sender, key, owner, resp)
			})
		})
		// Duplicate, store level: one Claim answered with the stored response.
		b.Run(fmt.Sprintf("store/duplicate/senders=%d", conc), func(b *testing.B) {
			sender := fmt.Sprintf("bench-dup-%d", run.Add(1))
			const keys = 1000
			for k := 0; k < keys; k++ {
				key := "evt_" + strconv.Itoa(k)
				if _, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: "h", Owner: "o", Lease: time.Minute, TTL: time.Hour}); err != nil {
					b.Fatal(err)
				}
				if err := s.Complete(ctx, sender, key, "o", resp); err != nil {
					b.Fatal(err)
				}
			}
			redisLoad(b, conc, func(ctx context.Context, i int64) error {
				key := "evt_" + strconv.FormatInt(i%keys, 10)
				res, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: "h", Owner: "dup", Lease: time.Minute, TTL: time.Hour})
				if err != nil {
					return err
				}
				if res.Outcome != dedupe.Duplicate {
					return fmt.Errorf("claim %s = %v, want duplicate", key, res.Outcome)
				}
				return nil
			})
		})
		// Through the proxy, new event: claim, forward, complete.
		b.Run(fmt.Sprintf("proxy/new/senders=%d", conc), func(b *testing.B) {
			prefix := fmt.Sprintf("new-%d-", run.Add(1))
			redisLoad(b, conc, func(_ context.Context, i int64) error {
				return redisPost(client, hook, prefix+strconv.FormatInt(i, 10), false)
			})
		})
		// Through the proxy, duplicate: replayed from the stored answer.
		b.Run(fmt.Sprintf("proxy/duplicate/senders=%d", conc), func(b *testing.B) {
			prefix := fmt.Sprintf("dup-%d-", run.Add(1))
			const keys = 256
			for k := 0; k < keys; k++ {
				if err := redisPost(client, hook, prefix+strconv.Itoa(k), false); err != nil {
					b.Fatal(err)
				}
			}
			redisLoad(b, conc, func(_ context.Context, i int64) error {
				return redisPost(client, hook, prefix+strconv.FormatInt(i%keys, 10), true)
			})
		})
		// Reference: a bare SET NX through the same client library.
		b.Run(fmt.Sprintf("reference/go-redis-setnx/senders=%d", conc), func(b *testing.B) {
			c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, PoolSize: 64})
			defer c.Close()
			prefix := fmt.Sprintf("bench:setnx:%d:", run.Add(1))
			redisLoad(b, conc, func(ctx context.Context, i int64) error {
				return c.SetNX(ctx, prefix+strconv.FormatInt(i, 10), "1", time.Hour).Err()
			})
		})
	}
	// Reference: redis-benchmark's own client on the same server, run once
	// (-n 100000 -c 32) however often the benchmark framework calls back.
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"set", []string{"-t", "set"}},
		{"setnx", []string{"SET", "bench:rb:__rand_int__", "x", "NX"}},
	} {
		var once sync.Once
		var rps float64
		b.Run("reference/redis-benchmark-"+tc.name+"/senders=32", func(b *testing.B) {
			once.Do(func() {
				var out string
				rps, out = redisBenchmark(b, srv, tc.args...)
				b.Logf("redis-benchmark -n 100000 -c 32 -r 100000000 %s → %s", strings.Join(tc.args, " "), out)
			})
			b.ReportMetric(rps, "events/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

var rpsRe = regexp.MustCompile(`([0-9.]+) requests per second`)

func redisBenchmark(b *testing.B, srv *redistest.Server, args ...string) (float64, string) {
	b.Helper()
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		b.Skip("redis-benchmark not installed")
	}
	cmd := exec.Command(bin, append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(srv.Port()),
		"-n", "100000", "-c", "32", "-r", "100000000", "-q"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("redis-benchmark: %v: %s", err, out)
	}
	// -q prints progress lines separated by \r; the last line is the result.
	text := strings.TrimSpace(string(out))
	if i := strings.LastIndexAny(text, "\r\n"); i >= 0 {
		text = strings.TrimSpace(text[i+1:])
	}
	m := rpsRe.FindStringSubmatch(text)
	if m == nil {
		b.Fatalf("redis-benchmark output without a rate: %q", text)
	}
	rps, _ := strconv.ParseFloat(m[1], 64)
	return rps, text
}
