package bench_test

// PostgreSQL store benchmarks: new-event and duplicate throughput with
// p50/p99 latency at 1, 8 and 32 concurrent senders, at the store and
// through the proxy, next to two references on the same machine: pgbench
// running the same INSERT-then-UPDATE (claim + complete) with 32 clients,
// and a bare httputil.ReverseProxy in front of the same trivial site.
//
//	go test ./bench -run '^$' -bench Postgres -benchtime 2s
//
// The server is a throwaway cluster on loopback (internal/pgtest) with
// fsync and synchronous_commit on, so that a claim costs what it costs in
// production. The store uses its default pool size.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/pgtest"
	"github.com/hookonce/hookonce/proxy"
)

var pgSenders = []int{1, 8, 32}

// pgLoad runs op b.N times spread over conc goroutines and reports events/s
// and the p50/p99 latency of one op.
func pgLoad(b *testing.B, conc int, op func(i int64) error) {
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

const pgBenchConfig = `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
`

// pgPost sends one webhook and checks the answer.
func pgPost(c *http.Client, url, id string, wantReplay bool) error {
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

func BenchmarkPostgres(b *testing.B) {
	srv := pgtest.StartWith(b, pgtest.Options{Durable: true})
	dsn := srv.NewDatabase(b)
	ctx := context.Background()
	s, err := postgres.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	var run atomic.Int64
	resp := dedupe.Response{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"ok":true}`)}

	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	b.Cleanup(site.Close)
	siteURL, _ := url.Parse(site.URL)
	c, err := contract.Parse([]byte(pgBenchConfig), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	px, err := proxy.New(proxy.Options{Upstream: siteURL, Contract: c, Store: s})
	if err != nil {
		b.Fatal(err)
	}
	pxSrv := httptest.NewServer(px)
	b.Cleanup(func() { pxSrv.Close(); _ = px.Close(context.Background()) })
	bare := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(siteURL)
		r.SetXForwarded()
	}})
	b.Cleanup(bare.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	b.Cleanup(client.CloseIdleConnections)
	hook := pxSrv.URL + "/hooks/shop"

	for _, conc := range pgSenders {
		// Store level, new event: Claim (new key) + Complete.
		b.Run(fmt.Sprintf("store/new/senders=%d", conc), func(b *testing.B) {
			sender := fmt.Sprintf("bench-new-%d", run.Add(1))
			pgLoad(b, conc, func(i int64) error {
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
		// Store level, duplicate: one Claim answered from a read.
		b.Run(fmt.Sprintf("store/duplicate/senders=%d", conc), func(b *testing.B) {
			sender := fmt.Sprintf("bench-dup-%d", run.Add(1))
			const keys = 1000
			for k := range keys {
				key := "evt_" + strconv.Itoa(k)
				if _, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: "h", Owner: "o", Lease: time.Minute, TTL: time.Hour}); err != nil {
					b.Fatal(err)
				}
				if err := s.Complete(ctx, sender, key, "o", resp); err != nil {
					b.Fatal(err)
				}
			}
			pgLoad(b, conc, func(i int64) error {
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
			pgLoad(b, conc, func(i int64) error {
				return pgPost(client, hook, prefix+strconv.FormatInt(i, 10), false)
			})
		})
		// Through the proxy, duplicate: replayed from the stored answer.
		b.Run(fmt.Sprintf("proxy/duplicate/senders=%d", conc), func(b *testing.B) {
			prefix := fmt.Sprintf("dup-%d-", run.Add(1))
			const keys = 256
			for k := range keys {
				if err := pgPost(client, hook, prefix+strconv.Itoa(k), false); err != nil {
					b.Fatal(err)
				}
			}
			pgLoad(b, conc, func(i int64) error {
				return pgPost(client, hook, prefix+strconv.FormatInt(i%keys, 10), true)
			})
		})
		// Reference: a bare ReverseProxy in front of the same site.
		b.Run(fmt.Sprintf("reference/reverseproxy/senders=%d", conc), func(b *testing.B) {
			pgLoad(b, conc, func(i int64) error {
				return pgPost(client, bare.URL+"/hooks/shop", "x", false)
			})
		})
	}

	// The default pool (16 connections on 2 cores) caps how many commits
	// share one fsync; pgbench runs 32 connections. The same load with a
	// pool as large as the number of senders:
	b.Run("pool_max_conns=32", func(b *testing.B) {
		s32, err := postgres.New(ctx, dsn+"&pool_max_conns=32")
		if err != nil {
			b.Fatal(err)
		}
		defer s32.Close()
		px32, err := proxy.New(proxy.Options{Upstream: siteURL, Contract: c, Store: s32})
		if err != nil {
			b.Fatal(err)
		}
		srv32 := httptest.NewServer(px32)
		defer func() { srv32.Close(); _ = px32.Close(context.Background()) }()
		b.Run("store/new/senders=32", func(b *testing.B) {
			sender := fmt.Sprintf("bench-new-%d", run.Add(1))
			pgLoad(b, 32, func(i int64) error {
				key, owner := "evt_"+strconv.FormatInt(i, 10), "o"+strconv.FormatInt(i, 10)
				if _, err := s32.Claim(ctx, dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: "h", Owner: owner, Lease: 30 * time.Second, TTL: time.Hour}); err != nil {
					return err
				}
				return s32.Complete(ctx, sender, key, owner, resp)
			})
		})
		b.Run("proxy/new/senders=32", func(b *testing.B) {
			prefix := fmt.Sprintf("new-%d-", run.Add(1))
			pgLoad(b, 32, func(i int64) error {
				return pgPost(client, srv32.URL+"/hooks/shop", prefix+strconv.FormatInt(i, 10), false)
			})
		})
	})

	// Reference: pgbench running claim + complete (the same INSERT, then
	// the same UPDATE, each its own transaction) with 32 clients for 10s.
	b.Run("reference/pgbench-claim-complete/clients=32", func(b *testing.B) {
		bin, err := pgtest.BinDir()
		if err != nil {
			b.Skip(err)
		}
		script := filepath.Join(b.TempDir(), "claim.sql")
		if err := os.WriteFile(script, []byte(pgbenchClaimSQL), 0o644); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(bin, "pgbench"), "-n", "-c", "32", "-j", "2", "-T", "10", "-f", script,
			"-h", "127.0.0.1", "-p", strconv.Itoa(srv.Port()), "-U", "postgres", filepath.Base(dsnPath(dsn)))
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("pgbench: %v\n%s", err, out)
		}
		m := regexp.MustCompile(`tps = ([0-9.]+)`).FindSubmatch(out)
		lat := regexp.MustCompile(`latency average = ([0-9.]+) ms`).FindSubmatch(out)
		if m == nil {
			b.Fatalf("no tps in pgbench output:\n%s", out)
		}
		tps, _ := strconv.ParseFloat(string(m[1]), 64)
		b.ReportMetric(tps, "events/s")
		if lat != nil {
			avg, _ := strconv.ParseFloat(string(lat[1]), 64)
			b.ReportMetric(avg*1000, "avg-µs")
		}
		b.ReportMetric(0, "ns/op")
	})
}

func dsnPath(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return ""
	}
	return u.Path
}

// pgbenchClaimSQL is a new event as the store writes it: the claim INSERT
// (ON CONFLICT, as the store's), then the fenced UPDATE of complete.
const pgbenchClaimSQL = `\set k random(1, 1000000000000)
INSERT INTO hookonce_records AS r (sender, key, state, payload_hash, owner, lease_until, received_at, expires_at)
SELECT 'pgbench', 'k' || :k, 'processing', 'h', 'o' || :k, n.t + interval '30 seconds', n.t, n.t + interval '72 hours'
FROM (SELECT clock_timestamp() AS t) n
ON CONFLICT (sender, key) DO NOTHING;
UPDATE hookonce_records SET state = 'done', owner = NULL, lease_until = NULL, completed_at = clock_timestamp(),
  resp_status = 200, resp_headers = '{"Content-Type":["application/json"]}', resp_body = '{"ok":true}', resp_truncated = false
WHERE sender = 'pgbench' AND key = 'k' || :k AND owner = 'o' || :k AND state = 'processing';
`
