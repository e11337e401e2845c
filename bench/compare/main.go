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
	"slices"
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
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
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

// durableConfig is config with hookonce answering once the delivery is
// stored (ack: durable): the acknowledgement's added cost is measured
// against config's synchronous claim.
const durableConfig = config + "    ack: durable\n"

// Names of the paths the targets (report.go) are judged on.
const (
	nameDirect      = "direct to the site"
	nameBare        = "bare httputil.ReverseProxy"
	nameNginx       = "nginx proxy_pass (keepalive)"
	namePass        = "hookonce pass-through"
	nameNewSQLite   = "hookonce new events, SQLite"
	nameStoreSQLite = "store only (Claim+Complete, no HTTP), SQLite"
	nameDup         = "hookonce duplicates, SQLite (replay cache)"
	nameNewPG       = "hookonce new events, PostgreSQL"
	nameStorePG     = "store only (Claim+Complete, no HTTP), PostgreSQL"
	namePgx         = "reference: hookonce's new-event statements, pgx, each its own commit"
	namePgbench     = "reference: hookonce's new-event statements, real pgbench -M prepared -c %d -j 2"
	namePgbenchRate = "reference: hookonce's new-event statements, real pgbench -M prepared -R %.0f"
	nameServePass   = "hookonce serve (own process): pass-through"
	nameServeNewPG  = "hookonce serve (own process): new events, PostgreSQL"
)

const (
	hookPath = "/hooks/shop"
	passPath = "/other/callback" // no sender names it
	seedKeys = 256               // events stored before duplicate and mix runs
)

func main() {
	if inRole, err := runRole(); inRole {
		if err != nil {
			fmt.Fprintln(os.Stderr, "compare role:", err)
			os.Exit(1)
		}
		return
	}
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	run := run
	if o.mode == "deploy" {
		run = runDeploy
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
	servers func() time.Duration // CPU time of its external servers (nil: none)
	// proc, when set, is the CPU time of the hookonce serve process the
	// path goes through (its own process, apart from this one).
	proc func() time.Duration
	// before, when set, runs before each measurement of the path (the
	// PostgreSQL paths: CHECKPOINT).
	before func() error
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
		if res.Found != dedupe.Claimed {
			return fmt.Errorf("claim %s: %v", req.Key, res.Found)
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
	closed = append(closed, path{name: nameDirect, op: func(ctx context.Context, i int64) error {
		return p.post(ctx, site.URL+hookPath, "d"+strconv.FormatInt(i, 10), bodyA, wantStatus(200))
	}})

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
	closed = append(closed, path{name: bareName, op: func(ctx context.Context, i int64) error {
		return p.post(ctx, bare.URL+hookPath, "b"+strconv.FormatInt(i, 10), bodyA, wantStatus(200))
	}})

	// (3) nginx proxy_pass with an upstream keepalive pool.
	if ng, err := startNginx(siteURL.Host, o.conns); err != nil {
		r.notes = append(r.notes, "nginx: not measured ("+err.Error()+")")
	} else {
		r.defer_(ng.Close)
		closed = append(closed, path{name: nameNginx, op: func(ctx context.Context, i int64) error {
			return p.post(ctx, ng.URL+hookPath, "n"+strconv.FormatInt(i, 10), bodyA, wantStatus(200))
		}, servers: func() time.Duration { return treeCPU([]int{ng.PID()}) }})
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
	closed = append(closed, path{name: namePass, op: func(ctx context.Context, i int64) error {
		return p.post(ctx, hoSQ+passPath, "p"+strconv.FormatInt(i, 10), bodyA, wantStatus(200))
	}})
	closed = append(closed, path{name: nameNewSQLite, op: newEvents(p, hoSQ+hookPath, "new-")})
	closed = append(closed, path{name: nameStoreSQLite, op: storeOnly(sq)})
	if err := seed(p, hoSQ+hookPath, "dup-"); err != nil {
		return err
	}
	closed = append(closed, path{name: nameDup, op: func(ctx context.Context, i int64) error {
		return p.post(ctx, hoSQ+hookPath, "dup-"+strconv.FormatInt(i%seedKeys, 10), bodyA, wantReplay(true))
	}})
	if err := seed(p, hoSQ+hookPath, "mix-"); err != nil {
		return err
	}
	closed = append(closed, path{name: "hookonce mix 70/25/5 new/dup/conflict, SQLite", op: func(ctx context.Context, i int64) error {
		switch k := "mix-" + strconv.FormatInt(i%seedKeys, 10); {
		case i%20 < 14:
			return p.post(ctx, hoSQ+hookPath, "mixnew-"+strconv.FormatInt(i, 10), bodyA, wantReplay(false))
		case i%20 < 19:
			return p.post(ctx, hoSQ+hookPath, k, bodyA, wantReplay(true))
		default:
			return p.post(ctx, hoSQ+hookPath, k, bodyB, wantStatus(contract.DefaultConflictStatus))
		}
	}})

	// (5) on PostgreSQL, the floor (hookonce's own statements of a new
	// event, each its own commit) from pgx and real pgbench, and a real
	// hookonce serve process, all on one server.
	var open []path
	open = append(open, closed[0])
	var pgSrv *pgtest.Server
	if srv, err := pgtest.StartServer(pgtest.Options{Durable: true, Settings: pgSettingsMap()}); err != nil {
		r.notes = append(r.notes, "PostgreSQL: not measured ("+err.Error()+")")
	} else {
		r.defer_(func() { srv.Close() })
		pgSrv = srv
		c, o2, err := r.postgresPaths(ctx, o, p, srv, siteURL, dir)
		if err != nil {
			return err
		}
		closed, open = append(closed, c...), append(open, o2...)
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
		closed = append(closed, path{name: "hookonce new events, Redis", op: newEvents(p, hoRD+hookPath, "new-"),
			servers: func() time.Duration { return treeCPU([]int{rs.PID()}) }})
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
			switch err := pt.prepare(); {
			case err != nil:
				s = sample{Errors: 1, FirstErr: err.Error()}
			case pt.external != nil:
				s = pt.external(0, o.duration)
			default:
				s = closedLoop(o.conns, warm, o.duration, pt.op, pt.meters())
			}
			closedRes[pt.name] = append(closedRes[pt.name], s)
		}
	}
	for round := range o.rounds {
		for _, pt := range abba(open, round) {
			fmt.Fprintf(os.Stderr, "round %d/%d open loop %.0f/s: %s\n", round+1, o.rounds, o.rate, pt.name)
			var s sample
			switch err := pt.prepare(); {
			case err != nil:
				s = sample{Errors: 1, FirstErr: err.Error()}
			case pt.external != nil:
				s = pt.external(o.rate, o.openDur)
			default:
				s = openLoop(o.rate, o.openDur, pt.op, pt.meters())
			}
			openRes[pt.name] = append(openRes[pt.name], s)
		}
	}

	if pgSrv != nil && (len(closed) > 0 || len(open) > 0) {
		if n, err := serverCheckpoints(pgSrv.Dir()); err != nil {
			r.notes = append(r.notes, "PostgreSQL checkpoints: not counted ("+err.Error()+")")
		} else {
			r.notes = append(r.notes, fmt.Sprintf("PostgreSQL checkpoints the server started by itself (timed or for WAL volume) during the whole run, from its log: %d; every measured PostgreSQL path (closed and open loop, every round) starts right after a CHECKPOINT", n))
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

func (p path) pathName() string { return p.name }

// keep returns the paths whose name re matches (this mode's and the
// deployment mode's alike).
func keep[P interface{ pathName() string }](ps []P, re *regexp.Regexp) []P {
	var out []P
	for _, p := range ps {
		if re.MatchString(p.pathName()) {
			out = append(out, p)
		}
	}
	return out
}

// abba returns the paths in round's order: forward in even rounds,
// reversed in odd ones.
func abba[P any](ps []P, round int) []P {
	out := slices.Clone(ps)
	if round%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

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

// prepare runs the path's before, if any.
func (pt path) prepare() error {
	if pt.before == nil {
		return nil
	}
	return pt.before()
}

func (pt path) meters() meters { return meters{servers: pt.servers, proc: pt.proc} }

// postgresPaths starts hookonce on srv and answers the PostgreSQL paths
// (closed loop, open loop): hookonce's new events, the store alone, the
// floor (hookonce's new-event statements, each its own commit) from pgx
// and from real pgbench, and a hookonce serve process of its own. Each is
// measured right after a CHECKPOINT.
func (r *rig) postgresPaths(ctx context.Context, o options, p *poster, srv *pgtest.Server, siteURL *url.URL, dir string) (closed, open []path, err error) {
	pgCPU := func() time.Duration { return treeCPU([]int{postmasterPID(srv)}) }
	dsn, err := srv.CreateDatabase(ctx, "compare")
	if err != nil {
		return nil, nil, err
	}
	pool := fmt.Sprintf("&pool_max_conns=%d", o.conns)
	pg, err := postgres.Open(ctx, dsn+pool)
	if err != nil {
		return nil, nil, err
	}
	hoPG, err := r.hookonce(pg, siteURL)
	if err != nil {
		return nil, nil, err
	}
	ckpt := func() error { return checkpoint(pg.Pool()) }
	pgNew := path{name: nameNewPG, op: newEvents(p, hoPG+hookPath, "new-"), servers: pgCPU, before: ckpt}
	closed = append(closed, pgNew, path{name: nameStorePG, op: storeOnly(pg), servers: pgCPU, before: ckpt})
	open = append(open, pgNew)
	r.notes = append(r.notes, fmt.Sprintf("PostgreSQL: %s; settings (docs/stores.md, Settings for production, scaled to this machine): %s; "+
		"the hookonce store, the pgx pool and the serve process each pool_max_conns=%d", pgVersion(), pgSettingsText(), o.conns))

	// The floor writes the values of a real event: one through hookonce,
	// read back from its row.
	c, err := contract.Parse([]byte(config), "compare.yaml")
	if err != nil {
		return nil, nil, err
	}
	sender := c.Senders[0]
	const sampleKey = "floor-sample"
	if err := p.post(ctx, hoPG+hookPath, sampleKey, bodyA, wantReplay(false)); err != nil {
		return nil, nil, fmt.Errorf("the floor's sample event: %w", err)
	}
	ev, err := readSample(ctx, pg.Pool(), sender.Name, sampleKey, sender.Lease, sender.TTL)
	if err != nil {
		return nil, nil, err
	}
	first, complete := postgres.NewEventStatements()
	pair, err := pgxpool.New(ctx, dsn+pool)
	if err != nil {
		return nil, nil, err
	}
	r.defer_(pair.Close)
	pgxPath := path{name: namePgx, op: func(ctx context.Context, i int64) error {
		k, owner := "k"+strconv.FormatInt(i, 10), "o"+strconv.FormatInt(i, 10)
		if _, err := pair.Exec(ctx, first, pgxArgs(ev.first("pgx", k, owner))...); err != nil {
			return err
		}
		tag, err := pair.Exec(ctx, complete, pgxArgs(ev.complete("pgx", k, owner))...)
		if err == nil && tag.RowsAffected() != 1 {
			err = fmt.Errorf("completion of %s: %d rows", k, tag.RowsAffected())
		}
		return err
	}, servers: pgCPU, before: ckpt}
	closed = append(closed, pgxPath)
	open = append(open, pgxPath)
	floor := fmt.Sprintf("the floor (reference rows): hookonce's own statements of a new event (dedupe/postgres.NewEventStatements): "+
		"the delivery's first try (an INSERT … ON CONFLICT DO NOTHING of the new key, or the read of the row there), then Complete's fenced UPDATE, "+
		"on hookonce's migrated schema, in the database hookonce uses; each statement its own transaction, so two commits per event, where hookonce "+
		"sends the same statements group-committed (one commit per batch of concurrent deliveries): that difference is what the comparison shows. "+
		"The values are those of an event hookonce stored first in this run (%s), with a new key and owner per event; "+
		"pgx sends them as parameters (its statement cache: prepared once per connection)", ev)

	bin, err := pgtest.BinDir()
	if err != nil {
		return nil, nil, err
	}
	if pb, err := pgbenchBin(bin); err != nil {
		r.notes = append(r.notes, "pgbench: not measured ("+err.Error()+")")
	} else {
		script, err := floorScript("pgbench", ev)
		if err != nil {
			return nil, nil, err
		}
		file := filepath.Join(dir, "floor.sql")
		if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
			return nil, nil, err
		}
		pgb := func(rate float64, d time.Duration) sample {
			n0, err0 := unfinished(ctx, pg.Pool(), "pgbench")
			s := runPgbench(pb, file, srv.Port(), "compare", o.conns, rate, d)
			n1, err1 := unfinished(ctx, pg.Pool(), "pgbench")
			var e string
			switch {
			case errors.Join(err0, err1) != nil:
				s.Errors, e = s.Errors+1, errors.Join(err0, err1).Error()
			case n1 > n0:
				s.Errors, e = s.Errors+n1-n0, fmt.Sprintf("%d events first-tried but never completed", n1-n0)
			}
			if s.FirstErr == "" {
				s.FirstErr = e
			}
			return s
		}
		closed = append(closed, path{name: fmt.Sprintf(namePgbench, o.conns), external: pgb, before: ckpt})
		open = append(open, path{name: fmt.Sprintf(namePgbenchRate, o.rate), external: pgb, before: ckpt})
		floor += fmt.Sprintf("; real pgbench (%s) runs them from a script (bench/compare/floor.go) under -M prepared -c %d -j 2 (open loop: -R %.0f), "+
			"the parameters replaced by pgbench variables (:k, :o, random per transaction) and by the event's values as literals; -T rounded to whole seconds, "+
			"no warm-up, latencies (both statements) from its per-transaction log", cmdVersion(pb, "--version"), o.conns, o.rate)
	}
	r.notes = append(r.notes, floor)

	// hookonce in a process of its own, so that its CPU is its own.
	if o.only != nil && !o.only.MatchString(nameServePass) && !o.only.MatchString(nameServeNewPG) {
		return closed, open, nil
	}
	sp, err := r.serve(ctx, srv, siteURL, dir, pool)
	if err != nil {
		r.notes = append(r.notes, "hookonce serve (own process): not measured ("+err.Error()+")")
		return closed, open, nil
	}
	closed = append(closed,
		path{name: nameServePass, op: func(ctx context.Context, i int64) error {
			return p.post(ctx, sp.URL+passPath, "sp"+strconv.FormatInt(i, 10), bodyA, wantStatus(200))
		}, proc: sp.CPU},
		path{name: nameServeNewPG, op: newEvents(p, sp.URL+hookPath, "snew-"), servers: pgCPU, proc: sp.CPU, before: ckpt})
	r.notes = append(r.notes, fmt.Sprintf("hookonce serve (own process): a `hookonce serve` process built from this checkout with the same contract, "+
		"--store postgres on the same server (database serve, pool_max_conns=%d), serve's defaults otherwise (replay cache on, --log-level %s), "+
		"--admin-listen on loopback, in front of the same in-process site; its CPU/req is that process's alone (/proc, its PID)", o.conns, serveLogLevel))
	return closed, open, nil
}

// serve starts a hookonce serve process on a database of its own on srv.
func (r *rig) serve(ctx context.Context, srv *pgtest.Server, siteURL *url.URL, dir, pool string) (*serveProc, error) {
	bin, err := buildHookonce(dir)
	if err != nil {
		return nil, err
	}
	dsn, err := srv.CreateDatabase(ctx, "serve")
	if err != nil {
		return nil, err
	}
	sp, err := startServe(bin, dir, siteURL.String(), dsn+pool)
	if err != nil {
		return nil, err
	}
	r.defer_(sp.stop)
	return sp, nil
}

// unfinished counts sender's records that are not done.
func unfinished(ctx context.Context, pool *pgxpool.Pool, sender string) (int64, error) {
	var n int64
	err := pool.QueryRow(ctx, `SELECT count(*) FROM hookonce_records WHERE sender = $1 AND state <> 'done'`, sender).Scan(&n)
	return n, err
}
