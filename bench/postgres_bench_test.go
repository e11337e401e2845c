package bench_test

// PostgreSQL store benchmarks: new-event and duplicate throughput with
// p50/p99 latency at 1, 8 and 32 concurrent senders, at the store and
// through the proxy (harness_test.go), next to a bare
// httputil.ReverseProxy in front of the same trivial site. The pgbench
// floor (hookonce's own statements of a new event, -M prepared, the
// production settings) is bench/compare's: go run -tags benchcompare
// ./bench/compare -only PostgreSQL.
//
//	go test ./bench -run '^$' -bench Postgres -benchtime 2s
//
// The server is a throwaway cluster on loopback (internal/testkit/pgtest) with
// fsync and synchronous_commit on, so that a claim costs what it costs in
// production. The store uses its default pool size.

import (
	"context"
	"testing"

	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
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
}
