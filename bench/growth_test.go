package bench_test

// Cost as the store grows: new events, duplicates and the purge of a day's
// expired records, measured through the real Store on a store filled to
// 0, 1 M and 10 M records (PostgreSQL) and 0 and 1 M (SQLite).
//
// The records are written straight into hookonce's own schema with SQL
// (INSERT … SELECT over generate_series / a recursive CTE), not through
// the Store: senders, random-looking keys, SHA-256-sized payload hashes,
// mostly done records with a stored answer and their attempts, some
// released, held and abandoned (processing, lease expired) ones, received
// over three days in time order with a 48 h ttl, so the oldest day is
// expired and waiting for the purge. The fill is incremental (0 → 1 M →
// 10 M), each step measured, and the expired share is topped up so that a
// third of the store is always expired when the purge runs.
//
// At each size, with 32 workers for a fixed time: new events (Claim of a
// new key, then Complete, as the proxy does), duplicates (Claim of a done
// record: Duplicate), and the same new-event load while serve's purge
// runs (dedupe/retention's Background: Purge with Limit 500, repeated
// until a batch comes back short, at serve's pace). The run during the purge also
// tells the new events that overlapped one of its batches from the others
// (each group's p99, and how many of the slowest 1% met a batch), beside
// how long the batches took: whether the claims wait on the purge's
// statements or on what they leave behind. With an offered rate, the run
// before the purge is also cut into windows of as many new events as the
// purge saw, and the purge's p99 is set against their median (windowP99s).
//
// Without HOOKONCE_GROWTH the test runs a short form (10,000 records, runs
// of 300 ms) that checks the fill against the schema and the Store; the
// full form is
//
//	HOOKONCE_GROWTH=full go test ./bench -run TestGrowth -v -timeout 3h
//
// HOOKONCE_GROWTH_PG and HOOKONCE_GROWTH_SQLITE override the sizes
// ("0,1000000"; "none" skips the backend), HOOKONCE_GROWTH_DURATION the
// length of a run, HOOKONCE_GROWTH_PURGE_DUTY paces the purge by a
// share of the time alone instead of serve's pace (0.3: serve's before
// its rate pacing; 1: flat out, as the purge command),
// HOOKONCE_GROWTH_PURGE_BATCH its batch (500, as serve's),
// HOOKONCE_GROWTH_PG_SET ("wal_compression=lz4,autovacuum=off", an
// experiment) adds or overrides PostgreSQL settings of the full run,
// HOOKONCE_GROWTH_RATE (new events per second) offers new events at
// that rate instead of flat out (the purge's effect at a site's load rather
// than at saturation), HOOKONCE_GROWTH_QUIET (5m in the full form; 0:
// the new events' run of the duration) measures the new events the purge
// is judged against in a run of that length just before the purge (a p99
// over a shorter run misses the slow minutes a run as long as the purge
// catches, and the purge is then blamed for them) and, as long, just after
// it (a purge's p99 above the run before and level with the run after
// found the machine slower, not the claims slowed), and
// HOOKONCE_GROWTH_OUT names a file for the Markdown tables (they are
// always logged).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/dedupe/retention"
	"github.com/hookonce/hookonce/dedupe/sqlite"
	"github.com/hookonce/hookonce/internal/testkit/openloop"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

const (
	growthWorkers    = 32
	growthTTL        = 48 * time.Hour
	growthPurgeBatch = retention.BackgroundBatch
	// growthQuiet is the full form's run without a purge that the purge is
	// judged against: as long as serve's purge of 1 M records' backlog
	// (334 k expired) takes on PostgreSQL, so that both hold as many of the
	// machine's slow minutes.
	growthQuiet     = 5 * time.Minute
	growthPGBatch   = 250_000 // rows per INSERT … SELECT statement
	growthLiteBatch = 100_000 // rows per SQLite transaction
	day             = 24 * time.Hour
)

// growthPGSettings are the server settings of the full run (pgtest adds
// fsync and full_page_writes on with Durable, 127.0.0.1, max_connections
// 200).
var growthPGSettings = map[string]string{
	"shared_buffers":       "2GB",
	"effective_cache_size": "8GB",
	"maintenance_work_mem": "512MB",
	"max_wal_size":         "8GB",
	"wal_compression":      "lz4", // docs/stores.md: half the purge's WAL, and fewer slow flushes during it
	// docs/stores.md's, as bench/compare runs: PostgreSQL's default of 5 min
	// put a timed checkpoint inside a five-minute purge and none in the
	// minute it is judged against (round 9).
	"checkpoint_timeout":           "15min",
	"checkpoint_completion_target": "0.9",
}

var growthSenders = []string{"stripe", "shopify", "github", "paypal", "yookassa", "robokassa", "tinkoff", "cloudpayments"}

// mixes are the multiplicative hashes (id·mul + add mod 2³²) that derive a
// record's key, payload hash, state and hits from its id, the same in Go
// and in both SQL dialects: 0–2 the key, 3–10 the payload hash, 11 the
// state, 12 the hits and the attempt's duration. Each mul is odd, so mix 0
// is a bijection on ids below 2³² and keys never collide.
var mixes = [][2]int64{
	{2654435761, 0}, {2246822519, 374761393}, {3266489917, 668265263},
	{2870177450 + 1, 1013904223}, {1664525, 12345}, {22695477, 1}, {1103515245, 12345},
	{134775813, 1}, {214013, 2531011}, {69069, 1}, {1140671485, 12820163},
	{2891336453, 2801}, {3039177861, 101},
}

func mix(k int, id int64) int64 { return (id*mixes[k][0] + mixes[k][1]) % (1 << 32) }

// mixSQL is mix(k, id) in SQL (both dialects: 64-bit integers, % on
// non-negative operands).
func mixSQL(k int, id string) string {
	return fmt.Sprintf("((%s * %d + %d) %% 4294967296)", id, mixes[k][0], mixes[k][1])
}

func growthKey(id int64) string {
	return fmt.Sprintf("evt_%08x%08x%08x", mix(0, id), mix(1, id), mix(2, id))
}

func growthHash(id int64) string {
	var b strings.Builder
	for k := 3; k <= 10; k++ {
		fmt.Fprintf(&b, "%08x", mix(k, id))
	}
	return b.String()
}

func growthSender(id int64) string { return growthSenders[id%int64(len(growthSenders))] }

// growthState: 1% released, 0.5% held (unknown), 0.5% processing under an
// expired lease (a proxy died), the rest done.
func growthState(id int64) dedupe.State {
	switch st := mix(11, id) % 1000; {
	case st < 10:
		return dedupe.StateReleased
	case st < 15:
		return dedupe.StateUnknown
	case st < 20:
		return dedupe.StateProcessing
	}
	return dedupe.StateDone
}

// stateSQL is growthState in SQL.
func stateSQL(id string) string {
	st := mixSQL(11, id) + " % 1000"
	return fmt.Sprintf("CASE WHEN %[1]s < 10 THEN 'released' WHEN %[1]s < 15 THEN 'unknown' WHEN %[1]s < 20 THEN 'processing' ELSE 'done' END", st)
}

// segment is one fill step: ids first … first+n-1, received over the three
// days before base in id order, the first expired of them on the oldest
// day (expired on arrival), the rest over the last two days.
type segment struct {
	first, n, expired int64
	base              time.Time
}

// receivedMS is when row j of the segment was received, in Unix ms; the
// SQL fills compute the same expression.
func (g segment) receivedMS(j int64) int64 {
	b := g.base.UnixMilli()
	if j < g.expired {
		return b - (3 * day).Milliseconds() + j*day.Milliseconds()/g.expired
	}
	return b - (2 * day).Milliseconds() + (j-g.expired)*(2*day).Milliseconds()/max(g.n-g.expired, 1)
}

// receivedSQL is receivedMS in SQL, for row j ($j) of a segment whose
// base, n and expired are the named parameters.
func receivedSQL(j, base, n, expired string) string {
	return fmt.Sprintf(`CASE WHEN %[1]s < %[4]s THEN %[2]s - %[5]d + %[1]s * %[6]d / %[4]s
		ELSE %[2]s - %[7]d + (%[1]s - %[4]s) * %[7]d / CASE WHEN %[3]s - %[4]s < 1 THEN 1 ELSE %[3]s - %[4]s END END`,
		j, base, n, expired, (3 * day).Milliseconds(), day.Milliseconds(), (2 * day).Milliseconds())
}

// growthDB is what the bench needs of a backend beyond the Store: filling
// it with SQL and counting.
type growthDB interface {
	fill(ctx context.Context, g segment) error
	settle(ctx context.Context) error // VACUUM ANALYZE / ANALYZE + checkpoint
	count(ctx context.Context) (total, expired int64, err error)
	size(ctx context.Context) (string, error)
	// written is a running count of the bytes the store has written (its
	// WAL on PostgreSQL; this process's writes to the disk for SQLite,
	// whose only writer it is), to tell what a purge writes per record.
	written(ctx context.Context) (int64, error)
}

// growthRun is one store being grown and measured.
type growthRun struct {
	name     string
	store    dedupe.Store
	db       growthDB
	segs     []segment
	nextID   int64
	duration time.Duration
	quiet    time.Duration // the run of new events without a purge that the purge is judged against (0: newEv, of duration)
	duty     float64       // 0: serve's pace (retention.Background); else the purge's share of time alone, in (0, 1] (1: no pause)
	perClaim bool          // retention.Background's: the store is not SQLite, as serve tells it
	batch    int           // records a purge call removes at most
	rate     float64       // new events offered per second (open loop); 0: growthWorkers flat out
	rows     []growthRow
	// spans, while set, collects each new event's time from its start to
	// its answer (the run during the purge, to see which of them met a
	// purge batch).
	spans *spanLog
}

// span is a stretch of time: a new event's, or a purge batch's.
type span struct{ from, to time.Time }

// spanLog collects spans from many goroutines.
type spanLog struct {
	mu    sync.Mutex
	spans []span
}

func (l *spanLog) add(from, to time.Time) {
	l.mu.Lock()
	l.spans = append(l.spans, span{from, to})
	l.mu.Unlock()
}

// at is the q-th percentile (0–100) of ds, sorted; 0 when there is none.
func at(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[(len(ds)-1)*q/100]
}

// batchOverlap tells the new events that overlapped a purge batch from
// the others: the p99 of each group and of all (by their time from start
// to answer), how many met one, and how many of the slowest 1%
// overlapped one. If the purge's own statements are what delays the
// claims, the slow ones meet a batch; if the cost comes after (the WAL it
// left, a vacuum), they need not. The others' p99 is what the same
// minutes looked like without the purge's batches: the p99 of all against
// it is the purge's cost, whatever the machine's mood meanwhile. batches
// are in the order they ran, one after another.
func batchOverlap(events, batches []span) overlap {
	meets := func(e span) bool {
		// the first batch that ends after the event starts
		i := sort.Search(len(batches), func(i int) bool { return batches[i].to.After(e.from) })
		return i < len(batches) && batches[i].from.Before(e.to)
	}
	var in, out, all []time.Duration
	for _, e := range events {
		d := e.to.Sub(e.from)
		all = append(all, d)
		if meets(e) {
			in = append(in, d)
		} else {
			out = append(out, d)
		}
	}
	slices.Sort(in)
	slices.Sort(out)
	slices.Sort(all)
	o := overlap{met: at(in, 99), other: at(out, 99), all: at(all, 99), n: len(in)}
	for _, e := range events {
		if e.to.Sub(e.from) > o.all {
			o.slow++
			if meets(e) {
				o.slowMet++
			}
		}
	}
	return o
}

// overlap is batchOverlap's answer: p99s of the events that met a batch,
// of the others and of all; n met one; of the slow ones slower than
// all's p99, slowMet met one.
type overlap struct {
	met, other, all  time.Duration
	n, slowMet, slow int
}

// windowP99s cuts a run's new events, in the order they were due, into
// windows of n and answers the p99 of each full window, in that order.
// Requests not answered (-1) are left out. A purge shorter than the run
// before it is judged against that run cut into windows as long as the
// purge: one stall of the machine (a slow disk flush holds every claim
// behind it) lands in a minute's p99 only diluted and in a few seconds'
// whole. A purge longer than the run before is shown cut into windows as
// long as that run, each beside it.
func windowP99s(byDue []time.Duration, n int) []time.Duration {
	if n <= 0 {
		return nil
	}
	var out []time.Duration
	for i := 0; i+n <= len(byDue); i += n {
		w := make([]time.Duration, 0, n)
		for _, l := range byDue[i : i+n] {
			if l >= 0 {
				w = append(w, l)
			}
		}
		if len(w) == 0 {
			continue
		}
		slices.Sort(w)
		out = append(out, at(w, 99))
	}
	return out
}

type growthRow struct {
	name                string
	records, expired    int64
	fill                time.Duration
	dbSize              string
	newEv, dup, inPurge loadResult
	quiet               loadResult // new events just before the purge (growthRun.quiet), or newEv
	// after: new events just after the purge, as long as quiet (none
	// without growthRun.quiet). A purge whose p99 is above the run before
	// and level with the run after found the machine slower, not the
	// claims slowed by the purge.
	after     loadResult
	purged    int
	purgeTime time.Duration
	purgeErr  string
	// windows: the p99s of the quiet run cut into windows of as many new
	// events as the purge saw (open loop only), sorted.
	windows []time.Duration
}

type loadResult struct {
	n        int64
	elapsed  time.Duration
	p50, p99 time.Duration
	errs     int64
	firstErr error
	byDue    []time.Duration // open loop: openloop.Result.ByDue
}

func (l loadResult) rate() float64 {
	if l.elapsed <= 0 {
		return 0
	}
	return float64(l.n) / l.elapsed.Seconds()
}

func TestGrowth(t *testing.T) {
	mode := os.Getenv("HOOKONCE_GROWTH")
	if mode == "" && testing.Short() {
		t.Skip("-short")
	}
	pgSizes, liteSizes := []int64{0, 10_000}, []int64{0, 10_000}
	duration := 300 * time.Millisecond
	full := mode != ""
	if full {
		pgSizes, liteSizes = []int64{0, 1_000_000, 10_000_000}, []int64{0, 1_000_000}
		duration = 10 * time.Second
	}
	if v := os.Getenv("HOOKONCE_GROWTH_PG"); v != "" {
		pgSizes = parseSizes(t, v)
	}
	if v := os.Getenv("HOOKONCE_GROWTH_SQLITE"); v != "" {
		liteSizes = parseSizes(t, v)
	}
	if v := os.Getenv("HOOKONCE_GROWTH_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		duration = d
	}
	var duty float64 // serve's pace
	if !full {
		duty = 0.3 // the short form checks the purge, not its pace, which would take seconds
	}
	if v := os.Getenv("HOOKONCE_GROWTH_PURGE_DUTY"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1 {
			t.Fatalf("HOOKONCE_GROWTH_PURGE_DUTY=%q: want a share in (0, 1]", v)
		}
		duty = f
	}
	batch := growthPurgeBatch
	if v := os.Getenv("HOOKONCE_GROWTH_PURGE_BATCH"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("HOOKONCE_GROWTH_PURGE_BATCH=%q: want a number of records", v)
		}
		batch = n
	}
	var quiet time.Duration
	if full {
		quiet = growthQuiet
	}
	if v := os.Getenv("HOOKONCE_GROWTH_QUIET"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			t.Fatalf("HOOKONCE_GROWTH_QUIET=%q: want a duration (0: the new events' run)", v)
		}
		quiet = d
	}
	var rate float64
	if v := os.Getenv("HOOKONCE_GROWTH_RATE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			t.Fatalf("HOOKONCE_GROWTH_RATE=%q: want new events per second", v)
		}
		rate = f
	}
	var runs []*growthRun
	if len(pgSizes) > 0 {
		t.Run("postgres", func(t *testing.T) {
			opts := pgtest.Options{}
			if full {
				opts = pgtest.Options{Durable: true, Settings: maps.Clone(growthPGSettings)}
				if set := os.Getenv("HOOKONCE_GROWTH_PG_SET"); set != "" {
					for _, kv := range strings.Split(set, ",") {
						k, v, ok := strings.Cut(kv, "=")
						if k = strings.TrimSpace(k); !ok || k == "" {
							t.Fatalf("HOOKONCE_GROWTH_PG_SET=%q: %q is not setting=value", set, kv)
						}
						opts.Settings[k] = strings.TrimSpace(v)
					}
				}
			}
			srv := pgtest.StartWith(t, opts)
			dsn := srv.NewDatabase(t)
			ctx := context.Background()
			s, err := postgres.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			pool, err := pgxpool.New(ctx, dsn+"&pool_max_conns=2")
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			r := &growthRun{name: "PostgreSQL", store: s, db: &pgGrowth{pool: pool}, duration: duration, quiet: quiet, duty: duty, perClaim: true, batch: batch, rate: rate}
			runs = append(runs, r)
			r.grow(t, pgSizes)
		})
	}
	if len(liteSizes) > 0 {
		t.Run("sqlite", func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hookonce.db")
			ctx := context.Background()
			s, err := sqlite.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)")
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(1)
			defer db.Close()
			r := &growthRun{name: "SQLite", store: s, db: &liteGrowth{db: db}, duration: duration, quiet: quiet, duty: duty, batch: batch, rate: rate}
			runs = append(runs, r)
			r.grow(t, liteSizes)
		})
	}
	report := growthReport(runs, duration)
	t.Log("\n" + report)
	if out := os.Getenv("HOOKONCE_GROWTH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func parseSizes(t *testing.T, v string) []int64 {
	if v == "none" {
		return nil
	}
	var out []int64
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(strings.ReplaceAll(f, "_", "")), 10, 64)
		if err != nil || n < 0 {
			t.Fatalf("bad size %q in %q", f, v)
		}
		out = append(out, n)
	}
	return out
}

// grow fills the store to each size in turn and measures it there.
func (r *growthRun) grow(t *testing.T, sizes []int64) {
	ctx := context.Background()
	for _, size := range sizes {
		total, expired, err := r.db.count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		row := growthRow{name: r.name}
		if add := size - total; add > 0 {
			// A third of the store expired after the fill: the new rows
			// bring what is missing.
			wantExpired := min(max(size/3-expired, 0), add)
			g := segment{first: r.nextID, n: add, expired: wantExpired, base: time.Now()}
			t0 := time.Now()
			if err := r.db.fill(ctx, g); err != nil {
				t.Fatalf("fill %s to %d: %v", r.name, size, err)
			}
			if err := r.db.settle(ctx); err != nil {
				t.Fatalf("settle %s: %v", r.name, err)
			}
			row.fill = time.Since(t0)
			r.segs = append(r.segs, g)
			r.nextID += add
			t.Logf("%s: filled %d records (%d expired) in %s", r.name, add, wantExpired, row.fill.Round(time.Second))
		}
		if row.records, row.expired, err = r.db.count(ctx); err != nil {
			t.Fatal(err)
		}
		row.dbSize, _ = r.db.size(ctx)
		if size > 0 {
			r.check(t)
		}
		w0, werr := r.db.written(ctx)
		row.newEv = r.loadNew(ctx, r.duration, nil)
		w1, werr1 := r.db.written(ctx)
		// What a new event writes, to tell the purge's writing from the
		// claims' beside it.
		perEvent := float64(w1-w0) / float64(max(row.newEv.n, 1))
		werr = errors.Join(werr, werr1)
		t.Logf("%s %d: new %.0f/s p99 %s", r.name, row.records, row.newEv.rate(), row.newEv.p99)
		if r.liveDone() > 0 {
			row.dup = r.load(ctx, r.duration, nil, r.duplicate)
			t.Logf("%s %d: duplicates %.0f/s p99 %s", r.name, row.records, row.dup.rate(), row.dup.p99)
		}
		if row.expired > 0 {
			row.quiet = row.newEv
			if r.quiet > 0 {
				row.quiet = r.loadNew(ctx, r.quiet, nil)
				t.Logf("%s %d: new %.0f/s p99 %s over %s, before the purge", r.name, row.records, row.quiet.rate(), row.quiet.p99, r.quiet)
			}
			stop := make(chan struct{})
			var perr error
			var batches []span
			r.spans = &spanLog{}
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(stop)
				time.Sleep(r.duration / 10) // the load runs before the purge starts
				t0 := time.Now()
				row.purged, perr = growthPurge(ctx, r.store, r.perClaim, r.batch, r.duty, func(from, to time.Time) {
					batches = append(batches, span{from, to})
				})
				row.purgeTime = time.Since(t0)
			}()
			p0, perr0 := r.db.written(ctx)
			row.inPurge = r.loadNew(ctx, 0, stop)
			wg.Wait()
			events := r.spans.spans
			r.spans = nil
			p1, perr1 := r.db.written(ctx)
			if err := errors.Join(werr, perr0, perr1); err == nil && row.purged > 0 {
				// What the purge wrote, beyond what the claims write in as
				// long: a page (or more) per record means the records it
				// deletes together lie on pages of their own.
				extra := float64(p1-p0) - perEvent*float64(row.inPurge.n)
				t.Logf("%s %d: %.0f MB written during the purge, %.0f MB beyond its %d new events' (%.1f KB each): %.1f KB per record purged",
					r.name, row.records, float64(p1-p0)/1e6, extra/1e6, row.inPurge.n, perEvent/1e3, extra/1e3/float64(row.purged))
			} else if err != nil {
				t.Logf("%s: bytes written not read: %v", r.name, err)
			}
			if perr != nil {
				t.Errorf("%s purge: %v", r.name, perr)
				row.purgeErr = perr.Error()
			}
			if int64(row.purged) < row.expired {
				t.Errorf("%s: purged %d records, %d were expired", r.name, row.purged, row.expired)
			}
			t.Logf("%s %d: purged %d in %s; new %.0f/s p99 %s during it", r.name, row.records, row.purged,
				row.purgeTime.Round(time.Millisecond), row.inPurge.rate(), row.inPurge.p99)
			if n := len(row.quiet.byDue); n > 0 && len(row.inPurge.byDue) >= 2*n {
				// A purge longer than the run before: its p99 minute by
				// minute (as long as that run), in order, beside the run
				// before's. A stall that the purge's whole p99 hides (or
				// that is not its batches': the vacuum after its deletes,
				// a slow disk) shows in its minute.
				t.Logf("%s %d: the run during the purge, in windows as long as the run before (%d new events), p99 in order: %s; the run before: %s",
					r.name, row.records, n, msList(windowP99s(row.inPurge.byDue, n)), ms(row.quiet.p99))
			}
			if row.windows = windowP99s(row.quiet.byDue, len(row.inPurge.byDue)); len(row.windows) > 0 {
				slices.Sort(row.windows)
				above := sort.Search(len(row.windows), func(i int) bool { return row.windows[i] >= row.inPurge.p99 })
				t.Logf("%s %d: the run before, in %d windows of %d new events (as many as during the purge): p99 median %s, worst %s; the purge's p99 is above %d of them",
					r.name, row.records, len(row.windows), len(row.inPurge.byDue), ms(at(row.windows, 50)), ms(at(row.windows, 100)), above)
			}
			if r.quiet > 0 {
				row.after = r.loadNew(ctx, r.quiet, nil)
				t.Logf("%s %d: new %.0f/s p99 %s over %s, after the purge (before it: %s, during it: %s)", r.name, row.records,
					row.after.rate(), row.after.p99, r.quiet, row.quiet.p99, row.inPurge.p99)
			}
			var busy time.Duration
			took := make([]time.Duration, 0, len(batches))
			for _, b := range batches {
				busy += b.to.Sub(b.from)
				took = append(took, b.to.Sub(b.from))
			}
			slices.Sort(took)
			o := batchOverlap(events, batches)
			if len(took) > 0 && len(events) > 0 {
				t.Logf("%s %d: %d purge batches, %.1f%% of the purge's time, each p50 %s, p99 %s, max %s; %d new events (%.1f%%) met a batch, p99 %s, the others %s, all %s (%+.1f ms); of the slowest 1%% (%d), %d met a batch",
					r.name, row.records, len(took), 100*busy.Seconds()/max(row.purgeTime.Seconds(), 1e-9), ms(at(took, 50)), ms(at(took, 99)), ms(at(took, 100)),
					o.n, 100*float64(o.n)/float64(len(events)), ms(o.met), ms(o.other), ms(o.all), float64(o.all-o.other)/1e6, o.slow, o.slowMet)
			}
		}
		for _, l := range []loadResult{row.newEv, row.dup, row.quiet, row.inPurge, row.after} {
			if l.errs > 0 {
				t.Errorf("%s %d: %d operations failed, first: %v", r.name, row.records, l.errs, l.firstErr)
			}
		}
		r.rows = append(r.rows, row)
	}
}

// growthPurge is serve's background purge (retention.Background, one
// run; perClaim: not SQLite), or with a duty one paced by that share of
// the time alone, in batches of batch. onBatch is told each batch's start and end.
func growthPurge(ctx context.Context, s dedupe.Store, perClaim bool, batch int, duty float64, onBatch func(from, to time.Time)) (int, error) {
	p := retention.Background(s, perClaim)
	if duty > 0 {
		p.Duty, p.Floor, p.RampEvery = duty, 0, 0
	}
	p.OnBatch = onBatch
	return p.Run(ctx, dedupe.PurgeRequest{Limit: batch})
}

var growthResp = dedupe.Response{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"received":true}`)}

// newEvent is a new event as the proxy stores it: Claim of a new key, then
// Complete with the site's answer.
func (r *growthRun) newEvent(ctx context.Context, rng *rand.Rand) error {
	if l := r.spans; l != nil {
		t0 := time.Now()
		defer func() { l.add(t0, time.Now()) }()
	}
	sender := growthSenders[rng.IntN(len(growthSenders))]
	key := fmt.Sprintf("evt_new_%016x%08x", rng.Uint64(), rng.Uint32())
	hash := fmt.Sprintf("%016x%016x%016x%016x", rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64())
	owner := fmt.Sprintf("%016x", rng.Uint64())
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := r.store.Claim(cctx, dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: hash, Owner: owner,
		Lease: 30 * time.Second, TTL: growthTTL})
	if err != nil {
		return err
	}
	if res.Found != dedupe.Claimed {
		return fmt.Errorf("claim %s/%s = %v, want claimed", sender, key, res.Found)
	}
	return r.store.Complete(cctx, sender, key, owner, growthResp, dedupe.Attempt{At: time.Now(), By: dedupe.AttemptBySender,
		Outcome: "processed", Status: 200, Duration: 20 * time.Millisecond, Replica: "bench/1"})
}

// liveDone counts the filled rows that are live (received in the last two
// days of their segment).
func (r *growthRun) liveDone() int64 {
	var n int64
	for _, g := range r.segs {
		n += g.n - g.expired
	}
	return n
}

// pickLive picks a filled record that is done and far from expiring.
func (r *growthRun) pickLive(rng *rand.Rand) (int64, bool) {
	soon := time.Now().Add(-growthTTL + 15*time.Minute).UnixMilli() // received before: expires within 15 min
	for range 100 {
		x := rng.Int64N(r.liveDone())
		for _, g := range r.segs {
			live := g.n - g.expired
			if x >= live {
				x -= live
				continue
			}
			j := g.expired + x
			id := g.first + j
			if growthState(id) == dedupe.StateDone && g.receivedMS(j) > soon {
				return id, true
			}
			break
		}
	}
	return 0, false
}

// duplicate is a repeat of a stored, done event: one Claim answered with
// the stored response.
func (r *growthRun) duplicate(ctx context.Context, rng *rand.Rand) error {
	id, ok := r.pickLive(rng)
	if !ok {
		return errors.New("no live done record to repeat")
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sender, key := growthSender(id), growthKey(id)
	res, err := r.store.Claim(cctx, dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: growthHash(id),
		Owner: fmt.Sprintf("%016x", rng.Uint64()), Lease: 30 * time.Second, TTL: growthTTL})
	if err != nil {
		return err
	}
	if res.Found != dedupe.Duplicate || res.Record.Response == nil || res.Record.Response.Status != 200 {
		return fmt.Errorf("claim %s/%s (id %d) = %v, want duplicate with a stored 200", sender, key, id, res.Found)
	}
	return nil
}

// check reads a few filled records back through the Store: the fill wrote
// what the Store reads.
func (r *growthRun) check(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		id, ok := r.pickLive(rng)
		if !ok {
			t.Fatal("no live done record")
		}
		rec, err := r.store.Get(ctx, growthSender(id), growthKey(id))
		if err != nil {
			t.Fatalf("%s: get filled record %d: %v", r.name, id, err)
		}
		if rec.State != dedupe.StateDone || rec.PayloadHash != growthHash(id) || rec.Response == nil ||
			string(rec.Response.Body) != `{"received":true}` || len(rec.Attempts) == 0 || rec.Attempts[len(rec.Attempts)-1].Status != 200 ||
			rec.ExpiresAt.Sub(rec.ReceivedAt) != growthTTL {
			t.Fatalf("%s: filled record %d reads back as %+v", r.name, id, rec)
		}
	}
}

// load runs op with growthWorkers workers for d, or until stop is closed
// when d is 0, and reports the rate and the latency of one op.
func (r *growthRun) load(ctx context.Context, d time.Duration, stop <-chan struct{}, op func(context.Context, *rand.Rand) error) loadResult {
	if d > 0 {
		ch := make(chan struct{})
		time.AfterFunc(d, func() { close(ch) })
		stop = ch
	}
	var done atomic.Bool
	go func() { <-stop; done.Store(true) }()
	lat := make([][]time.Duration, growthWorkers)
	var errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for w := range growthWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			for !done.Load() {
				t0 := time.Now()
				if err := op(ctx, rng); err != nil {
					if errs.Add(1) == 1 {
						firstErr.Store(err)
					}
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	res := loadResult{elapsed: time.Since(start), errs: errs.Load()}
	res.firstErr, _ = firstErr.Load().(error)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	res.n = int64(len(all))
	slices.Sort(all)
	res.p50, res.p99 = at(all, 50), at(all, 99)
	return res
}

// loadNew runs new events: flat out from growthWorkers, or offered at
// r.rate per second (HOOKONCE_GROWTH_RATE), each due at its time and its
// latency counted from then (a stall counts for every event it delays),
// the load a site sees rather than the most two cores can carry.
func (r *growthRun) loadNew(ctx context.Context, d time.Duration, stop <-chan struct{}) loadResult {
	if r.rate <= 0 {
		return r.load(ctx, d, stop, r.newEvent)
	}
	if d > 0 {
		ch := make(chan struct{})
		time.AfterFunc(d, func() { close(ch) })
		stop = ch
	}
	res := openloop.Run(r.rate, 0, stop, 4*growthWorkers, func(k int64) error {
		return r.newEvent(ctx, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(k))))
	})
	out := loadResult{n: int64(len(res.Latencies)), elapsed: res.Elapsed, errs: res.Errors, firstErr: res.FirstErr, byDue: res.ByDue}
	out.p50, out.p99 = at(res.Latencies, 50), at(res.Latencies, 99)
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// msList is ds in milliseconds, one decimal, comma-separated.
func msList(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond))
	}
	return strings.Join(parts, ", ") + " ms"
}

func human(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.2f M", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.0f k", float64(n)/1e3)
	}
	return strconv.FormatInt(n, 10)
}

func growthReport(runs []*growthRun, d time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d workers, %s per run; new event = Claim + Complete, duplicate = Claim of a done record.\n\n", growthWorkers, d)
	if len(runs) > 0 && runs[0].rate > 0 {
		fmt.Fprintf(&b, "New events offered at %.0f/s (open loop, latency from when each was due; HOOKONCE_GROWTH_RATE), duplicates flat out.\n\n", runs[0].rate)
	}
	if len(runs) > 0 {
		if bg := retention.Background(nil, true); runs[0].duty == 0 {
			fmt.Fprintf(&b, "The purge deletes batches of %d at serve's pace: at most %.0f%% of the time, and on PostgreSQL from %.0f records/s, doubling after each %s it goes on (HOOKONCE_GROWTH_PURGE_DUTY: a share of the time alone instead).\n\n",
				runs[0].batch, 100*bg.Duty, bg.Floor, bg.RampEvery)
		} else {
			fmt.Fprintf(&b, "The purge deletes batches of %d, %.0f%% of the time (HOOKONCE_GROWTH_PURGE_DUTY; serve's pace: at most %.0f%%, and on PostgreSQL from %.0f records/s).\n\n",
				runs[0].batch, 100*runs[0].duty, 100*bg.Duty, bg.Floor)
		}
		without := fmt.Sprintf("the new events' run above (%s)", d)
		if runs[0].quiet > 0 {
			without = fmt.Sprintf("a run of new events over %s just before the purge (HOOKONCE_GROWTH_QUIET); p99 after: one as long just after it", runs[0].quiet)
		}
		fmt.Fprintf(&b, "p99 without: %s.\n\n", without)
	}
	b.WriteString("| store | records | fill | size | new events/s | p50 | p99 | vs empty | duplicates/s | p50 | p99 |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range runs {
		var empty float64
		for i, row := range r.rows {
			if i == 0 {
				empty = row.newEv.rate()
			}
			fill := "–"
			if row.fill > 0 {
				fill = row.fill.Round(time.Second).String()
			}
			vs := "–"
			if empty > 0 {
				vs = fmt.Sprintf("%.2f×", row.newEv.rate()/empty)
			}
			dup := "| – | – | –"
			if row.dup.n > 0 {
				dup = fmt.Sprintf("| %.0f | %s | %s", row.dup.rate(), ms(row.dup.p50), ms(row.dup.p99))
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %.0f | %s | %s | %s %s |\n", row.name, human(row.records), fill, row.dbSize,
				row.newEv.rate(), ms(row.newEv.p50), ms(row.newEv.p99), vs, dup)
		}
	}
	b.WriteString("\n| store | records | expired purged | purge time | purged/s | new events/s during | p50 | p99 | p99 without | Δ p99 | p99 after | p99 without, windows as long (median, worst) | Δ p99, median window |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range runs {
		for _, row := range r.rows {
			if row.purged == 0 && row.purgeErr == "" {
				continue
			}
			win, dwin := "–", "–"
			if len(row.windows) > 0 {
				med := at(row.windows, 50)
				win = fmt.Sprintf("%s, %s (%d)", ms(med), ms(at(row.windows, 100)), len(row.windows))
				dwin = fmt.Sprintf("%+.1f ms", float64(row.inPurge.p99-med)/float64(time.Millisecond))
			}
			after := "–"
			if row.after.n > 0 {
				after = ms(row.after.p99)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %.0f | %.0f | %s | %s | %s | %+.1f ms | %s | %s | %s |\n", row.name, human(row.records),
				human(int64(row.purged)), row.purgeTime.Round(100*time.Millisecond), float64(row.purged)/row.purgeTime.Seconds(),
				row.inPurge.rate(), ms(row.inPurge.p50), ms(row.inPurge.p99), ms(row.quiet.p99),
				float64(row.inPurge.p99-row.quiet.p99)/float64(time.Millisecond), after, win, dwin)
		}
	}
	return b.String()
}

// pgGrowth fills hookonce_records with SQL, on connections of its own
// (synchronous_commit off for the fill only).
type pgGrowth struct{ pool *pgxpool.Pool }

// pgFillSQL writes rows $2 … $3-1 of a segment ($1 first id, $4 n, $5
// expired, $6 base in Unix ms).
var pgFillSQL = func() string {
	hash := make([]string, 0, 8)
	for k := 3; k <= 10; k++ {
		hash = append(hash, "lpad(to_hex("+mixSQL(k, "id")+"), 8, '0')")
	}
	senders := "ARRAY['" + strings.Join(growthSenders, "','") + "']"
	return `
INSERT INTO hookonce_records (sender, key, state, payload_hash, owner, lease_until, received_at, completed_at,
	expires_at, hits, takeovers, resp_status, resp_headers, resp_body, resp_truncated, attempts)
SELECT (` + senders + `)[1 + id % 8],
	'evt_' || lpad(to_hex(` + mixSQL(0, "id") + `), 8, '0') || lpad(to_hex(` + mixSQL(1, "id") + `), 8, '0') || lpad(to_hex(` + mixSQL(2, "id") + `), 8, '0'),
	st, ` + strings.Join(hash, " || ") + `,
	CASE WHEN st = 'processing' THEN 'dead' || id END,
	CASE WHEN st = 'processing' THEN rcv + interval '30 seconds' END,
	rcv,
	CASE WHEN st = 'done' THEN rcv + dur END,
	rcv + interval '48 hours',
	CASE WHEN st = 'done' AND m12 % 10 = 0 THEN 1 + m12 % 3 ELSE 0 END,
	0,
	CASE WHEN st = 'done' THEN 200 END,
	CASE WHEN st = 'done' THEN '{"Content-Type": ["application/json"]}'::jsonb END,
	CASE WHEN st = 'done' THEN '{"received":true}'::bytea END,
	false,
	CASE st WHEN 'processing' THEN '[]'::jsonb ELSE
		CASE WHEN st = 'done' AND m12 % 20 = 1 THEN jsonb_build_array(jsonb_build_object(
			'at', to_char((rcv - interval '5 minutes') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
			'by', 'sender', 'outcome', 'not_success', 'status', 500, 'duration_ns', m12 * 7 % 900000000, 'replica', 'web-2/1187'))
		ELSE '[]'::jsonb END || jsonb_build_array(jsonb_build_object(
			'at', to_char(rcv AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'by', 'sender',
			'outcome', CASE st WHEN 'done' THEN 'processed' WHEN 'released' THEN 'released' ELSE 'ambiguous' END,
			'status', CASE st WHEN 'done' THEN 200 WHEN 'released' THEN 502 ELSE 0 END,
			'duration_ns', (extract(epoch FROM dur) * 1e9)::bigint, 'replica', 'web-1/4242'))
	END
FROM (
	SELECT id, rcv, ` + stateSQL("id") + ` AS st, m12, (20 + m12 % 400) * interval '1 millisecond' AS dur
	FROM (
		SELECT $1::bigint + j AS id, to_timestamp((` + receivedSQL("j", "$6::bigint", "$4::bigint", "$5::bigint") + `) / 1000.0) AS rcv,
			` + mixSQL(12, "($1::bigint + j)") + ` AS m12
		FROM generate_series($2::bigint, $3::bigint - 1) AS j
	) a
) b`
}()

func (p *pgGrowth) fill(ctx context.Context, g segment) error {
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	var next atomic.Int64
	for range 2 { // two cores
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := p.pool.Acquire(ctx)
			if err != nil {
				errc <- err
				return
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, `SET synchronous_commit = off`); err != nil {
				errc <- err
				return
			}
			for {
				j0 := (next.Add(1) - 1) * growthPGBatch
				if j0 >= g.n {
					return
				}
				j1 := min(j0+growthPGBatch, g.n)
				if _, err := conn.Exec(ctx, pgFillSQL, g.first, j0, j1, g.n, g.expired, g.base.UnixMilli()); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

func (p *pgGrowth) settle(ctx context.Context) error {
	_, err := p.pool.Exec(ctx, `VACUUM ANALYZE hookonce_records`)
	if err == nil {
		_, err = p.pool.Exec(ctx, `CHECKPOINT`)
	}
	return err
}

func (p *pgGrowth) count(ctx context.Context) (total, expired int64, err error) {
	err = p.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE expires_at <= now()) FROM hookonce_records`).Scan(&total, &expired)
	return
}

func (p *pgGrowth) written(ctx context.Context) (int64, error) {
	var n int64
	// The WAL's insert position, exact at once (pg_stat_wal is flushed
	// by each backend at most once a second).
	err := p.pool.QueryRow(ctx, `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint`).Scan(&n)
	return n, err
}

func (p *pgGrowth) size(ctx context.Context) (string, error) {
	var s string
	err := p.pool.QueryRow(ctx, `SELECT pg_size_pretty(pg_total_relation_size('hookonce_records'))`).Scan(&s)
	return s, err
}

// liteGrowth fills the records table of the SQLite file on a connection
// of its own (synchronous off for the fill only).
type liteGrowth struct{ db *sql.DB }

// liteFillSQL writes rows ?2 … ?3-1 of a segment (?1 first id, ?4 n, ?5
// expired, ?6 base in Unix ms): the same records as pgFillSQL, in the
// SQLite schema (times in Unix ms, JSON as TEXT).
var liteFillSQL = func() string {
	var hash []string
	for k := 3; k <= 10; k++ {
		hash = append(hash, mixSQL(k, "id"))
	}
	var senders strings.Builder
	for i, s := range growthSenders {
		fmt.Fprintf(&senders, " WHEN %d THEN '%s'", i, s)
	}
	return `
INSERT INTO records (sender, key, state, payload_hash, owner, lease_until, received_at, completed_at,
	expires_at, hits, takeovers, status, headers, body, truncated, attempts)
WITH RECURSIVE s(j) AS (SELECT ?2 UNION ALL SELECT j + 1 FROM s WHERE j + 1 < ?3)
SELECT CASE id % 8` + senders.String() + ` END,
	printf('evt_%08x%08x%08x', ` + mixSQL(0, "id") + `, ` + mixSQL(1, "id") + `, ` + mixSQL(2, "id") + `),
	st, printf('` + strings.Repeat("%08x", 8) + `', ` + strings.Join(hash, ", ") + `),
	CASE WHEN st = 'processing' THEN 'dead' || id ELSE '' END,
	CASE WHEN st = 'processing' THEN rcv + 30000 ELSE 0 END,
	rcv,
	CASE WHEN st = 'done' THEN rcv + dur ELSE 0 END,
	rcv + ` + strconv.FormatInt(growthTTL.Milliseconds(), 10) + `,
	CASE WHEN st = 'done' AND m12 % 10 = 0 THEN 1 + m12 % 3 ELSE 0 END,
	0,
	CASE WHEN st = 'done' THEN 200 ELSE 0 END,
	CASE WHEN st = 'done' THEN CAST('{"Content-Type":["application/json"]}' AS BLOB) END,
	CASE WHEN st = 'done' THEN CAST('{"received":true}' AS BLOB) END,
	0,
	CASE st WHEN 'processing' THEN NULL ELSE
		'[' || CASE WHEN st = 'done' AND m12 % 20 = 1 THEN json_object('at_ms', rcv - 300000, 'by', 'sender',
			'outcome', 'not_success', 'status', 500, 'duration_ns', m12 * 7 % 900000000, 'replica', 'web-2/1187') || ',' ELSE '' END
		|| json_object('at_ms', rcv, 'by', 'sender',
			'outcome', CASE st WHEN 'done' THEN 'processed' WHEN 'released' THEN 'released' ELSE 'ambiguous' END,
			'status', CASE st WHEN 'done' THEN 200 WHEN 'released' THEN 502 ELSE 0 END,
			'duration_ns', dur * 1000000, 'replica', 'web-1/4242') || ']'
	END
FROM (
	SELECT id, rcv, ` + stateSQL("id") + ` AS st, m12, 20 + m12 % 400 AS dur
	FROM (SELECT ?1 + j AS id, ` + receivedSQL("j", "?6", "?4", "?5") + ` AS rcv, ` + mixSQL(12, "(?1 + j)") + ` AS m12 FROM s)
)`
}()

func (l *liteGrowth) fill(ctx context.Context, g segment) error {
	for j0 := int64(0); j0 < g.n; j0 += growthLiteBatch {
		j1 := min(j0+growthLiteBatch, g.n)
		tx, err := l.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, liteFillSQL, g.first, j0, j1, g.n, g.expired, g.base.UnixMilli()); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

func (l *liteGrowth) settle(ctx context.Context) error {
	_, err := l.db.ExecContext(ctx, `ANALYZE; PRAGMA wal_checkpoint(TRUNCATE)`)
	// The fill runs with synchronous=OFF, so its checkpoint left hundreds
	// of megabytes dirty in the kernel's cache; flushed by the kernel
	// during the first runs, they stalled every fsync of the store behind
	// them (new events at 1 M records offered at 1,000/s: a p99 of 1 s).
	// Write them out first, as a PostgreSQL fill's CHECKPOINT does.
	syscall.Sync()
	return err
}

func (l *liteGrowth) count(ctx context.Context) (total, expired int64, err error) {
	err = l.db.QueryRowContext(ctx, `SELECT count(*), (SELECT count(*) FROM records WHERE expires_at <= ?) FROM records`,
		time.Now().UnixMilli()).Scan(&total, &expired)
	return
}

// written reads write_bytes of /proc/self/io: what this process had the
// kernel write to storage (the WAL's frames and the checkpoints' pages),
// Linux only.
func (l *liteGrowth) written(context.Context) (int64, error) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("no write_bytes in /proc/self/io")
}

func (l *liteGrowth) size(ctx context.Context) (string, error) {
	var pages, pageSize int64
	if err := l.db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		return "", err
	}
	if err := l.db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d MB", pages*pageSize>>20), nil
}
