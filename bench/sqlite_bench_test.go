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
// hookonce serve opens it (WAL, synchronous=FULL by default, one writer).

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hookonce/hookonce/dedupe/cache"
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

// BenchmarkSQLiteCached is the duplicate path as serve runs it: the store
// behind the replay cache (dedupe/cache, serve's defaults), so a repeat is
// answered from memory with no store call. Its B/op is the replay path's
// allocations (client and site included); issue 35 holds it to nginx's
// proxy_pass.
//
//	go test ./bench -run '^$' -bench SQLiteCached -benchmem
func BenchmarkSQLiteCached(b *testing.B) {
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "hookonce.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	r := newRig(b, cache.New(s, cache.Options{Size: cache.DefaultSize, TTL: cache.DefaultTTL}))
	for _, conc := range senders {
		b.Run(fmt.Sprintf("proxy/duplicate/senders=%d", conc), func(b *testing.B) { r.proxyDuplicate(b, conc) })
	}
}
