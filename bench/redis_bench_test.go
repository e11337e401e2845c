package bench_test

// Redis store benchmarks: new-event and duplicate throughput with p50/p99
// latency at 1, 8 and 32 concurrent senders, at the store and through the
// proxy (harness_test.go), next to the reference a Redis client gets from
// the same server for a bare SET NX (go-redis at the same concurrency, and
// redis-benchmark).
//
//	go test ./bench -run '^$' -bench Redis -benchtime 2s
//
// The server runs with the append-only file on, fsync every second (what the
// docs/stores.md recommends), on loopback; client, proxy and server share the
// machine's cores.

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hookonce/hookonce/dedupe/redis"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
)

func BenchmarkRedis(b *testing.B) {
	srv := redistest.Start(b, "--appendonly", "yes", "--appendfsync", "everysec")
	ctx := context.Background()
	s, err := redis.Open(ctx, srv.URL()+"?pool_size=64")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	r := newRig(b, s)
	// Reference: a bare SET NX through the same client library.
	setNX := func(b *testing.B, conc int) {
		b.Run(fmt.Sprintf("reference/go-redis-setnx/senders=%d", conc), func(b *testing.B) {
			c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, PoolSize: 64})
			defer c.Close()
			prefix := fmt.Sprintf("bench:setnx:%d:", run.Add(1))
			load(b, conc, func(i int64) error {
				return c.SetNX(ctx, prefix+strconv.FormatInt(i, 10), "1", time.Hour).Err()
			})
		})
	}
	r.runStoreAndProxy(b, setNX)

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
