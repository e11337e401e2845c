//go:build benchcompare

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/cache"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/dedupe/redis"
	"github.com/hookonce/hookonce/dedupe/sqlite"
	"github.com/hookonce/hookonce/internal/pgtest"
	"github.com/hookonce/hookonce/internal/redistest"
	"github.com/hookonce/hookonce/proxy"
)

// config is the contract every hookonce path runs: one sender keyed on a
// header; any other path passes through.
const config = `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
`

// Names of the paths the targets (report.go) are judged on.
const (
	nameDirect      = "direct to the site"
	nameBare        = "bare httputil.ReverseProxy"
	namePass        = "hookonce pass-through"
	nameNewSQLite   = "hookonce new events, SQLite"
	nameStoreSQLite = "store only (Claim+Complete, no HTTP), SQLite"
	nameDup         = "hookonce duplicates, SQLite (replay cache)"
	nameNewPG       = "hookonce new events, PostgreSQL"
	nameStorePG     = "store only (Claim+Complete, no HTTP), PostgreSQL"
	namePgbench     = "reference: same pair, real pgbench -c %d -j 2"
	namePgbenchRate = "reference: same pair, real pgbench -R %.0f"
)

const (
	hookPath = "/hooks/shop"
	passPath = "/other/callback" // no sender names it
	seedKeys = 256               // events stored before duplicate and mix runs
)

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// path is one thing measured.
type path struct {
	name    string
	op      op
	servers func() time.Duration // CPU time of its external servers
	// external, when set, measures the path with a load generator of its
	// own (real pgbench) instead of op: closed loop with rate 0, else
	// open loop at rate.
	external func(rate float64, d time.Duration) sample
}

// body returns a ~1 KB JSON webhook; variant changes its content (a
// conflicting payload for the same key).
func body(variant int) []byte {
	pad := strings.Repeat("x", 860)
	return []byte(fmt.Sprintf(`{"type":"order.paid","variant":%d,"data":{"object":{"id":"ord_123","amount":1999,"currency":"usd","customer":"cus_42","metadata":{"note":%q}}}}`, variant, pad))
}

var (
	bodyA = body(0)
	bodyB = body(1)
)

func noServers() time.Duration { return 0 }

// rig holds everything started, to stop it at the end (in reverse order).
type rig struct {
	stops []func()
	notes []string
}

func (r *rig) defer_(f func()) { r.stops = append(r.stops, f) }

func (r *rig) close() {
	for i := len(r.stops) - 1; i >= 0; i-- {
		r.stops[i]()
	}
}

// hookonce starts a hookonce proxy on store (wrapped with the replay cache,
// as serve wires it) in front of upstream.
func (r *rig) hookonce(store dedupe.Store, upstream *url.URL) (string, error) {
	c, err := contract.Parse([]byte(config), "compare.yaml")
	if err != nil {
		store.Close()
		return "", err
	}
	px, err := proxy.New(proxy.Options{Upstream: upstream, Contract: c, Store: cache.New(store, cache.Options{}), KeepIdle: proxy.DefaultKeepIdle})
	if err != nil {
		store.Close()
		return "", err
	}
	srv, err := serveHTTP(px)
	if err != nil {
		_ = px.Close(context.Background())
		store.Close()
		return "", err
	}
	r.defer_(func() {
		srv.stop()
		_ = px.Close(context.Background())
		store.Close()
	})
	return srv.URL, nil
}

// storeOnly is a new event at the store alone, no HTTP: the Claim and the
// Complete a delivery makes, as the proxy makes them.
func storeOnly(store dedupe.Store) op {
	resp := dedupe.Response{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"ok":true}`)}
	return func(ctx context.Context, i int64) error {
		req := dedupe.ClaimRequest{Sender: "store-only", Key: "k" + strconv.FormatInt(i, 10), PayloadHash: "h",
			Owner: "o" + strconv.FormatInt(i, 10), Lease: 30 * time.Second, TTL: 72 * time.Hour}
		res, err := store.Claim(ctx, req)
		if err != nil {
			return err
		}
		if res.Outcome != dedupe.Claimed {
			return fmt.Errorf("claim %s: %v", req.Key, res.Outcome)
		}
		return store.Complete(ctx, req.Sender, req.Key, req.Owner, resp,
			dedupe.Attempt{At: time.Now(), By: "sender", Outcome: "completed", Status: 200})
	}
}

// newEvents posts a fresh event id each time.
func newEvents(p *poster, url, prefix string) op {
	return func(ctx context.Context, i int64) error {
		return p.post(ctx, url, prefix+strconv.FormatInt(i, 10), bodyA, wantReplay(false))
	}
}

// seed stores seedKeys events under prefix, for duplicate runs.
func seed(p *poster, url, prefix string) error {
	for k := range seedKeys {
		if err := p.post(context.Background(), url, prefix+strconv.Itoa(k), bodyA, wantReplay(false)); err != nil {
			return fmt.Errorf("seed %s: %w", url, err)
		}
	}
	return nil
}

func run(o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	load0 := loadavg()
	r := &rig{}
	defer r.close()
	p := newPoster(o.conns)
	r.defer_(p.close)
	ctx := context.Background()

	// (1) The site.
	site, err := serveHTTP(http.HandlerFunc(upstreamHandler))
	if err != nil {
		return err
	}
	r.defer_(site.stop)
	siteURL, _ := url.Parse(site.URL)
	var closed []path
	closed = append(closed, path{nameDirect, func(ctx context.Context, i int64) error {
		return p.post(ctx, site.URL+hookPath, "d"+strconv.FormatInt(i, 10), bodyA, wantStatus(200))
	}, noServers, nil})

	// (2) A bare httputil.ReverseProxy, with a transport keeping as many
	// idle connections as hookonce's (the default keeps 2 per host).
	bare, err := serveHTTP(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(siteURL); pr.SetXForwarded() },
		Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true,
			IdleConnTimeout: 90 * time.Second},
	})
	if err != nil {
		return err
	}
	r.defer_(bare.stop)
	const bareName = nameBare
	closed = append(closed, path{bareName, func(ctx context.Context, i int64) error {
		return p.post(ctx, bare.URL+hookPath, "b"+strconv.FormatInt(i, 10), bodyA, wantStatus(200))
	}, noServers, nil})

	// (3) nginx proxy_pass with an upstream keepalive pool.
	if ng, err := startNginx(siteURL.Host, o.conns); err != nil {
		r.notes = append(r.notes, "nginx: not measured ("+err.Error()+")")
	} else {
		r.defer_(ng.Close)
		closed = append(closed, path{"nginx proxy_pass (keepalive)", func(ctx context.Context, i int64) error {
			return p.post(ctx, ng.URL+hookPath, "n"+strconv.FormatInt(i, 10), bodyA, wantStatus(200))
		}, func() time.Duration { return treeCPU([]int{ng.PID()}) }, nil})
	}

	// (4)-(7) hookonce on SQLite.
	dir, err := os.MkdirTemp("", "compare-")
	if err != nil {
		return err
	}
	r.defer_(func() { os.RemoveAll(dir) })
	sq, err := sqlite.Open(ctx, filepath.Join(dir, "hookonce.db"))
	if err != nil {
		return err
	}
	hoSQ, err := r.hookonce(sq, siteURL)
	if err != nil {
		return err
	}
	closed = append(closed, path{namePass, func(ctx context.Context, i int64) error {
		return p.post(ctx, hoSQ+passPath, "p"+strconv.FormatInt(i, 10), bodyA, wantStatus(200))
	}, noServers, nil})
	closed = append(closed, path{nameNewSQLite, newEvents(p, hoSQ+hookPath, "new-"), noServers, nil})
	closed = append(closed, path{nameStoreSQLite, storeOnly(sq), noServers, nil})
	if err := seed(p, hoSQ+hookPath, "dup-"); err != nil {
		return err
	}
	closed = append(closed, path{nameDup, func(ctx context.Context, i int64) error {
		return p.post(ctx, hoSQ+hookPath, "dup-"+strconv.FormatInt(i%seedKeys, 10), bodyA, wantReplay(true))
	}, noServers, nil})
	if err := seed(p, hoSQ+hookPath, "mix-"); err != nil {
		return err
	}
	closed = append(closed, path{"hookonce mix 70/25/5 new/dup/conflict, SQLite", func(ctx context.Context, i int64) error {
		switch k := "mix-" + strconv.FormatInt(i%seedKeys, 10); {
		case i%20 < 14:
			return p.post(ctx, hoSQ+hookPath, "mixnew-"+strconv.FormatInt(i, 10), bodyA, wantReplay(false))
		case i%20 < 19:
			return p.post(ctx, hoSQ+hookPath, k, bodyA, wantReplay(true))
		default:
			return p.post(ctx, hoSQ+hookPath, k, bodyB, wantStatus(contract.DefaultConflictStatus))
		}
	}, noServers, nil})

	// (5) on PostgreSQL, and (8) the INSERT-then-UPDATE pair on the same
	// server and database.
	var open []path
	open = append(open, closed[0])
	if srv, err := pgtest.StartServer(pgtest.Options{Durable: true}); err != nil {
		r.notes = append(r.notes, "PostgreSQL: not measured ("+err.Error()+")")
	} else {
		r.defer_(func() { srv.Close() })
		pgCPU := func() time.Duration { return treeCPU([]int{postmasterPID(srv)}) }
		dsn, err := srv.CreateDatabase(ctx, "compare")
		if err != nil {
			return err
		}
		pool := fmt.Sprintf("&pool_max_conns=%d", o.conns)
		pg, err := postgres.Open(ctx, dsn+pool)
		if err != nil {
			return err
		}
		hoPG, err := r.hookonce(pg, siteURL)
		if err != nil {
			return err
		}
		pgNew := path{nameNewPG, newEvents(p, hoPG+hookPath, "new-"), pgCPU, nil}
		closed = append(closed, pgNew)
		closed = append(closed, path{nameStorePG, storeOnly(pg), pgCPU, nil})
		pair, err := pgxpool.New(ctx, dsn+pool)
		if err != nil {
			return err
		}
		r.defer_(pair.Close)
		pairPath := path{"reference: INSERT+UPDATE pair, pgx → PostgreSQL", func(ctx context.Context, i int64) error {
			k := "k" + strconv.FormatInt(i, 10)
			if _, err := pair.Exec(ctx, pairInsert, k); err != nil {
				return err
			}
			tag, err := pair.Exec(ctx, pairUpdate, k)
			if err == nil && tag.RowsAffected() != 1 {
				err = fmt.Errorf("update %s: %d rows", k, tag.RowsAffected())
			}
			return err
		}, pgCPU, nil}
		closed = append(closed, pairPath)
		open = append(open, pgNew, pairPath)
		if bin, err := pgtest.BinDir(); err == nil {
			if pb, err := pgbenchBin(bin); err != nil {
				r.notes = append(r.notes, "pgbench: not measured ("+err.Error()+")")
			} else {
				pgb := func(rate float64, d time.Duration) sample {
					return runPgbench(pb, dir, srv.Port(), "compare", o.conns, rate, d)
				}
				closed = append(closed, path{name: fmt.Sprintf(namePgbench, o.conns), external: pgb})
				open = append(open, path{name: fmt.Sprintf(namePgbenchRate, o.rate), external: pgb})
				r.notes = append(r.notes, "pgbench: "+cmdVersion(pb, "--version")+", custom script (the same INSERT then UPDATE, each its own transaction), -T rounded to whole seconds, no warm-up; latencies from its per-transaction log")
			}
		}
		r.notes = append(r.notes, fmt.Sprintf("PostgreSQL: %s, fsync and synchronous_commit on, hookonce store and pgx pool both pool_max_conns=%d", pgVersion(), o.conns))
	}

	// (5) on Redis (append-only file, fsync every second).
	rdir := filepath.Join(dir, "redis")
	_ = os.MkdirAll(rdir, 0o755)
	if rs, err := redistest.StartServer(rdir, "--appendonly", "yes", "--appendfsync", "everysec"); err != nil {
		r.notes = append(r.notes, "Redis: not measured ("+err.Error()+")")
	} else {
		r.defer_(rs.Close)
		rd, err := redis.Open(ctx, rs.URL()+"?pool_size=64")
		if err != nil {
			return err
		}
		hoRD, err := r.hookonce(rd, siteURL)
		if err != nil {
			return err
		}
		closed = append(closed, path{"hookonce new events, Redis", newEvents(p, hoRD+hookPath, "new-"),
			func() time.Duration { return treeCPU([]int{rs.PID()}) }, nil})
		r.notes = append(r.notes, "Redis: "+cmdVersion("redis-server", "--version")+", appendonly yes, appendfsync everysec")
	}

	if o.only != nil {
		closed, open = keep(closed, o.only), keep(open, o.only)
	}
	if o.cpuprof != "" {
		f, err := os.Create(o.cpuprof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if o.memprof != "" {
		defer func() {
			if f, err := os.Create(o.memprof); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	warm := min(o.duration/5, time.Second)
	closedRes := map[string][]sample{}
	openRes := map[string][]sample{}
	for round := range o.rounds {
		for _, pt := range abba(closed, round) {
			fmt.Fprintf(os.Stderr, "round %d/%d closed loop: %s\n", round+1, o.rounds, pt.name)
			var s sample
			if pt.external != nil {
				s = pt.external(0, o.duration)
			} else {
				s = closedLoop(o.conns, warm, o.duration, pt.op, pt.servers)
			}
			closedRes[pt.name] = append(closedRes[pt.name], s)
		}
	}
	for round := range o.rounds {
		for _, pt := range abba(open, round) {
			fmt.Fprintf(os.Stderr, "round %d/%d open loop %.0f/s: %s\n", round+1, o.rounds, o.rate, pt.name)
			if pt.external != nil {
				openRes[pt.name] = append(openRes[pt.name], pt.external(o.rate, o.openDur))
				continue
			}
			openRes[pt.name] = append(openRes[pt.name], openLoop(o.rate, o.openDur, pt.op, pt.servers))
		}
	}

	var fl *flood
	if o.only == nil || o.only.MatchString("flood") {
		fmt.Fprintln(os.Stderr, "memory under a flood")
		f := runFlood(dir)
		fl = &f
	}

	rep := report{opts: o, load0: load0, load1: loadavg(), notes: r.notes, bareName: bareName, flood: fl}
	for _, pt := range closed {
		rep.closed = append(rep.closed, summarize(pt.name, closedRes[pt.name]))
	}
	for _, pt := range open {
		rep.open = append(rep.open, summarize(pt.name, openRes[pt.name]))
	}
	md := rep.markdown()
	fmt.Print(md)
	if o.only != nil {
		return nil // a partial run: the committed results stay whole
	}
	if err := os.WriteFile(filepath.Join(o.out, "results.md"), []byte(md), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.out, "chart.svg"), []byte(rep.svg()), 0o644)
}

// keep returns the paths whose name re matches.
func keep(ps []path, re *regexp.Regexp) []path {
	var out []path
	for _, p := range ps {
		if re.MatchString(p.name) {
			out = append(out, p)
		}
	}
	return out
}

// abba returns the paths in round's order: forward in even rounds,
// reversed in odd ones.
func abba(ps []path, round int) []path {
	out := append([]path(nil), ps...)
	if round%2 == 1 {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

// The pgbench-equivalent pair: a new event as the PostgreSQL store writes
// it, the claim INSERT (ON CONFLICT, as the store's), then the fenced
// UPDATE of complete, each its own transaction (bench/postgres_bench_test.go
// runs the same two statements under pgbench).
const pairInsert = `INSERT INTO hookonce_records AS r (sender, key, state, payload_hash, owner, lease_until, received_at, expires_at)
SELECT 'pair', $1, 'processing', 'h', 'o' || $1, n.t + interval '30 seconds', n.t, n.t + interval '72 hours'
FROM (SELECT clock_timestamp() AS t) n
ON CONFLICT (sender, key) DO NOTHING`

const pairUpdate = `UPDATE hookonce_records SET state = 'done', owner = NULL, lease_until = NULL, completed_at = clock_timestamp(),
  resp_status = 200, resp_headers = '{"Content-Type":["application/json"]}', resp_body = '{"ok":true}', resp_truncated = false
WHERE sender = 'pair' AND key = $1 AND owner = 'o' || $1 AND state = 'processing'`

// postmasterPID reads the postmaster's PID from its data directory.
func postmasterPID(s *pgtest.Server) int {
	b, err := os.ReadFile(filepath.Join(s.Dir(), "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return pid
}

func pgVersion() string {
	bin, err := pgtest.BinDir()
	if err != nil {
		return "?"
	}
	return cmdVersion(filepath.Join(bin, "postgres"), "--version")
}
