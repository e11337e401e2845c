package bench_test

// PostgreSQL store benchmarks: new-event and duplicate throughput with
// p50/p99 latency at 1, 8 and 32 concurrent senders, at the store and
// through the proxy (harness_test.go), next to two references on the same
// machine: pgbench running the same INSERT-then-UPDATE (claim + complete)
// with 32 clients, and a bare httputil.ReverseProxy in front of the same
// trivial site.
//
//	go test ./bench -run '^$' -bench Postgres -benchtime 2s
//
// The server is a throwaway cluster on loopback (internal/pgtest) with
// fsync and synchronous_commit on, so that a claim costs what it costs in
// production. The store uses its default pool size.

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/pgtest"
)

func BenchmarkPostgres(b *testing.B) {
	srv := pgtest.StartWith(b, pgtest.Options{Durable: true})
	dsn := srv.NewDatabase(b)
	ctx := context.Background()
	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	r := newRig(b, s)
	// Reference: a bare ReverseProxy in front of the same site.
	r.runStoreAndProxy(b, r.reverseProxy)

	// The default pool (16 connections on 2 cores) caps how many commits
	// share one fsync; pgbench runs 32 connections. The same load with a
	// pool as large as the number of senders:
	b.Run("pool_max_conns=32", func(b *testing.B) {
		s32, err := postgres.Open(ctx, dsn+"&pool_max_conns=32")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s32.Close() })
		r32 := newRig(b, s32)
		b.Run("store/new/senders=32", func(b *testing.B) { r32.storeNew(b, 32) })
		b.Run("proxy/new/senders=32", func(b *testing.B) { r32.proxyNew(b, 32) })
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
