package bench_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/cache"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/dedupe/sqlite"
	"github.com/hookonce/hookonce/internal/testkit/benchrig"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/hookonce/hookonce/proxy"
)

// What one delivery allocates in hookonce's own process, as serve runs
// it (JSON log at info, the replay cache, kept site connections): the
// handler is called directly with a reused request, and the site is a
// loopback TCP server that answers from fixed bytes, so what is counted
// is the proxy's and the store's work alone.
//
//	go test ./bench -run '^$' -bench Delivery -benchmem
func BenchmarkDelivery(b *testing.B) {
	for _, st := range allocStores {
		b.Run(st.name, func(b *testing.B) {
			r := newAllocRig(b, st.open(b))
			// Keys are numbered across runs (r.n): -count runs each
			// sub-benchmark again on the same rig.
			b.Run("new", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					r.deliver(b, "new-"+strconv.FormatInt(r.n.Add(1), 10), false)
				}
			})
			b.Run("new/senders=32", func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(16)
				b.RunParallel(func(pb *testing.PB) {
					req := r.newRequest()
					for pb.Next() {
						r.deliverWith(b, req, "par-"+strconv.FormatInt(r.n.Add(1), 10), false)
					}
				})
			})
			b.Run("duplicate", func(b *testing.B) {
				key := "dup-" + strconv.FormatInt(r.n.Add(1), 10)
				r.deliver(b, key, false)
				b.ReportAllocs()
				for b.Loop() {
					r.deliver(b, key, true)
				}
			})
		})
	}
}

// allocStores are the stores the delivery's allocations are measured on.
var allocStores = []struct {
	name string
	open func(tb testing.TB) dedupe.Store
}{
	{"SQLite", func(b testing.TB) dedupe.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "hookonce.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}},
	{"PostgreSQL", func(b testing.TB) dedupe.Store {
		srv := pgtest.Start(b)
		s, err := postgres.Open(context.Background(), srv.NewDatabase(b))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}},
}

// Budgets of the delivery path's allocations per request, as measured
// after issue 35's changes (PostgreSQL ~17.0 KB, SQLite ~20.4 KB a new
// event, 1.37 KB a replay from memory) with a little room: a guard against
// regressions. Issue 35 asks 8 KB for a new event; what is left is listed
// in docs/performance.md ("Allocations per delivery"). Allocation counts,
// not time: the figures do not move with the machine's load. Issue 43
// added each new event's field fingerprint (its fields read as the site
// reads them, sorted, an 8-byte HMAC each, the blob stored with the
// claim): +1.0 KB and about 35 allocations a new event (SQLite 20.5 →
// 21.5 KB, PostgreSQL 17.1 → 17.9 KB, this test's 5-field JSON body),
// nothing on a replay (the store makes it only when it writes the claim);
// each budget rose by 1 KiB. Issue 45's durable delivery then added its
// six columns to every SQLite record read (SQLite 21.5 → 23.1 KB, 449
// allocations, over the budget); issue 47 scans a SQLite record into one
// struct (22.97 KB, 423) and writes PostgreSQL's attempt and header JSON
// without reflection (18.2 → 17.7 KB, 305 → 299): SQLite's budget is
// 23 KiB from then, PostgreSQL's lowered to 18 KiB. Issue 47's third
// round: the claimed forward of our own instead of httputil.ReverseProxy
// (proxy/sitecall.go), oneshot writing the request itself, and the store
// side of a new event cut (the fingerprint's allocations per field,
// PostgreSQL's pooled batch items and scans and its first statement's won
// row of times alone, SQLite's three-column probe before a record read):
// PostgreSQL 17.7 → 11.8 KB (299 → 169 allocations), SQLite 23.0 → 16.1
// KB (423 → 259); budgets 12.5 and 16.5 KiB. Then a claimed delivery's
// heartbeat became a timer that renews when a renewal is due (no
// goroutine, ticker or quit channel) and the forward's last lease check
// the heartbeat itself rather than a closure: PostgreSQL 11.8 → 11.6 KB
// (169 → 165 allocations), SQLite 16.1 → 15.8 KB (259 → 255); budgets
// 12.25 and 16.25 KiB.
// A replay-cache hit is answered from memory without an owner, a claim
// request or a store call's deadline, hashes in one allocation and says
// why the route took the sender without one: a duplicate 1.37 KB, 18
// allocations → 1.01 KB, 8; its budget lowered to 1152 B. Its second
// pass: the heartbeat's timer instead of a goroutine and a ticker, and a
// lone PostgreSQL claim or write sent from its caller's goroutine.
var newEventBudget = map[string]int64{"SQLite": 16<<10 + 256, "PostgreSQL": 12 << 10}

const duplicateBudget = 1152

func TestDeliveryAllocationBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own behalf; test.sh holds the budget in a run without -race")
	}
	for _, st := range allocStores {
		r := newAllocRig(t, st.open(t))
		r.deliver(t, "dup", false)
		for i := range 200 { // warm: connections, prepared statements, pools
			r.deliver(t, "warm-"+strconv.Itoa(i), false)
			r.deliver(t, "dup", true)
		}
		const n = 2000
		keys := make([]string, n)
		for i := range keys {
			keys[i] = "new-" + strconv.Itoa(i)
		}
		for _, tc := range []struct {
			name   string
			budget int64
			run    func(i int)
		}{
			{"new event", newEventBudget[st.name], func(i int) { r.deliver(t, keys[i], false) }},
			{"duplicate from the replay cache", duplicateBudget, func(int) { r.deliver(t, "dup", true) }},
		} {
			bytes, allocs := allocated(n, tc.run)
			t.Logf("%s on %s: %d B and %d allocations per request (%d requests)", tc.name, st.name, bytes, allocs, n)
			if bytes > tc.budget {
				t.Errorf("%s on %s allocates %d B per request, over its budget of %d B: go test ./bench -run '^$' -bench Delivery -memprofile mem.out shows where", tc.name, st.name, bytes, tc.budget)
			}
		}
	}
}

// allocated runs f n times and answers the bytes and allocations per run,
// the whole process's (the store's goroutines included), as -benchmem
// counts them.
func allocated(n int, f func(i int)) (bytes, allocs int64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		f(i)
	}
	runtime.ReadMemStats(&after)
	return int64(after.TotalAlloc-before.TotalAlloc) / int64(n), int64(after.Mallocs-before.Mallocs) / int64(n)
}

// allocRig is a proxy on a store behind the replay cache, as serve runs
// it, in front of fixedSite.
type allocRig struct {
	px  *proxy.Proxy
	req *benchrig.Request // deliver's, for one goroutine
	n   atomic.Int64      // numbers the keys of parallel runs, and of runs again under -count
}

const allocBody = `{"type":"order.paid","object":{"id":"ord_1042","amount":10000,"currency":"rub","customer":"cus_77"}}`

func newAllocRig(b testing.TB, store dedupe.Store) *allocRig {
	b.Helper()
	var s dedupe.Store = cache.New(store, cache.Options{Size: 10000, TTL: 5 * time.Second})
	c, err := contract.Parse([]byte(`
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
`), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	site := benchrig.FixedSite(b)
	px, err := proxy.New(proxy.Options{Upstream: site, Contract: c, Store: s, KeepIdle: proxy.DefaultKeepIdle,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = px.Close(context.Background()) })
	r := &allocRig{px: px}
	r.req = r.newRequest()
	return r
}

// newRequest makes a request for one goroutine's calls of deliverWith.
func (r *allocRig) newRequest() *benchrig.Request { return benchrig.NewRequest(allocBody) }

// deliver sends the rig's request under key and checks the answer.
func (r *allocRig) deliver(b testing.TB, key string, replayed bool) {
	r.deliverWith(b, r.req, key, replayed)
}

func (r *allocRig) deliverWith(b testing.TB, q *benchrig.Request, key string, replayed bool) {
	q.Deliver(b, r.px, proxy.ReplayHeader, key, replayed)
}
