package bench_test

// SQLite store benchmarks (the embedded default store): new-event and
// duplicate throughput with p50/p99 latency at 1, 8 and 32 concurrent
// senders, at the store and through the proxy (harness_test.go). No
// external reference: there is no server; the bare ReverseProxy reference
// runs under BenchmarkPostgres.
//
//	go test ./bench -run '^$' -bench SQLite -benchtime 2s
//
// The file sits in a throwaway directory on the machine's disk, opened as
// hookonce serve opens it (WAL, synchronous=NORMAL, one writer).

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hookonce/hookonce/dedupe/sqlite"
)

func BenchmarkSQLite(b *testing.B) {
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "hookonce.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	newRig(b, s).runStoreAndProxy(b)
}
