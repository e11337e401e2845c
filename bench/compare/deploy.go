//go:build benchcompare

package main

// The deployment mode (-mode deploy): hookonce measured as it runs in a
// deployment. Every server is a process of its own: the site and a bare
// httputil.ReverseProxy (this program started again in a role, roles.go),
// nginx, `hookonce serve` built from the checkout (on PostgreSQL, on
// SQLite with its default synchronous=FULL and with ?synchronous=normal),
// PostgreSQL; the closed-loop load is real wrk (-t 2 -c 32, a ~1 KB JSON
// POST with a new event id per request, or one of 256 stored ids for
// duplicates), the floor real pgbench -M prepared on hookonce's own
// statements. This process only starts things, reads /proc and, for the
// open loop (wrk cannot hold a rate), sends the 200 requests/s itself.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

// dpath is one thing measured in the deployment mode.
type dpath struct {
	name string
	// url and mode ("unique": a new event id per request; "dup": one of
	// the 256 seeded ids) for wrk; external (pgbench) instead when set.
	url, mode string
	external  func(rate float64, d time.Duration) sample
	op        op                   // the open loop's request (this process sends it)
	hookonce  func() time.Duration // the serve process's CPU (nil: none)
	proc      *serveProc           // the serve process (-serveprofile)
	servers   func() time.Duration // the other servers' CPU (nginx, postgres, the bare proxy)
	before    func() error         // before each measurement (PostgreSQL: CHECKPOINT)
	// siteRuns says how many executions of the site a request should
	// cause: 1 (each reaches the site once), 0 (duplicates: none) or -1
	// (not checked: pgbench).
	siteRuns int
	// refused counts the requests sent to be refused (never reaching the
	// site) on a siteRuns 1 path; nil: none.
	refused *atomic.Int64
	// drain, when set, waits until the serve process owes no durable
	// delivery, before the site's count is read.
	drain *serveProc
}

// drainOwed waits (2 min at most) until the path's durable serve process,
// if any, owes no delivery: those accepted in a round are otherwise still
// reaching the site in the next path's.
func (pt dpath) drainOwed() {
	if pt.drain == nil {
		return
	}
	if err := pt.drain.drained(2 * time.Minute); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// dsample is one wrk run's figures and what the processes spent on it.
type dsample struct {
	sample
	hookonceCPU, siteCPU, serversCPU, loadCPU time.Duration
	siteRuns                                  int64
	switches                                  int64 // the serve process's context switches (-1: not counted)
}

// wrkScript is the Lua script of every wrk path: the same work for the
// load generator on each (a header set per request), a new event id per
// request (prefix, thread, counter) or one of the 256 stored duplicates,
// and a machine-readable summary line.
func wrkScript(body []byte) string {
	return `wrk.method = "POST"
wrk.body = [==[` + string(body) + `]==]
wrk.headers["Content-Type"] = "application/json"
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local prefix, mode, n = "x-", "unique", 0
function init(args)
  prefix = (args[1] or "x") .. "-" .. tostring(tid) .. "-"
  mode = args[2] or "unique"
end
function request()
  n = n + 1
  if mode == "dup" then
    wrk.headers["X-Event-Id"] = "dup-" .. tostring(n % 256)
  else
    wrk.headers["X-Event-Id"] = prefix .. tostring(n)
  end
  return wrk.format()
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRKRESULT %d %d %d %d %d %d %d %d %d %d %d\n",
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end
`
}

var wrkResultRe = regexp.MustCompile(`WRKRESULT((?: -?[0-9]+){11})`)

// runWrk runs wrk against url for d (whole seconds, at least 1) and reads
// its summary line. Its CPU (a child of this process) is the load's.
func runWrk(bin, script, url string, threads, conns int, d time.Duration, args ...string) sample {
	secs := max(int((d+time.Second/2)/time.Second), 1)
	cmdArgs := []string{"-t", strconv.Itoa(threads), "-c", strconv.Itoa(conns), "-d", strconv.Itoa(secs) + "s",
		"--timeout", "10s", "-s", script, url}
	if len(args) > 0 {
		cmdArgs = append(append(cmdArgs, "--"), args...)
	}
	cmd := exec.Command(bin, cmdArgs...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	ch0 := childCPU()
	out, err := cmd.CombinedOutput()
	s := sample{SelfCPU: childCPU() - ch0}
	if err != nil {
		s.Errors, s.FirstErr = 1, fmt.Sprintf("wrk: %v: %s", err, lastLine(out))
		return s
	}
	m := wrkResultRe.FindSubmatch(out)
	if m == nil {
		s.Errors, s.FirstErr = 1, "no summary in wrk's output: "+lastLine(out)
		return s
	}
	var f [11]int64
	for i, v := range strings.Fields(string(m[1])) {
		f[i], _ = strconv.ParseInt(v, 10, 64)
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	s.Requests, s.Elapsed = f[0], us(f[1])
	if e := f[2] + f[3] + f[4] + f[5] + f[6]; e > 0 {
		s.Errors = e
		s.FirstErr = fmt.Sprintf("wrk: connect %d, read %d, write %d, status ≥ 400 %d, timeout %d", f[2], f[3], f[4], f[5], f[6])
	}
	s.P50, s.P99, s.P999, s.Max = us(f[7]), us(f[8]), us(f[9]), us(f[10])
	return s
}

// wrkVersion is wrk's first line of -v (which exits 1).
func wrkVersion(bin string) string {
	out, _ := exec.Command(bin, "-v").CombinedOutput()
	if l := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]); l != "" {
		return l
	}
	return "wrk (version unknown)"
}

// roleProc is this program started again in a role (roles.go).
type roleProc struct {
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startRole(role, upstream string) (*roleProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), roleEnv+"="+role, roleListenEnv+"="+addr, roleUpstreamEnv+"="+upstream)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &roleProc{URL: "http://" + addr, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	if err := waitDial(addr, p.done); err != nil {
		p.stop()
		return nil, fmt.Errorf("%s: %w", role, err)
	}
	return p, nil
}

func (p *roleProc) CPU() time.Duration { return treeCPU([]int{p.cmd.Process.Pid}) }

func (p *roleProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// settledRuns reads the site's count once it has not moved for 200 ms
// (at most 5 s): requests wrk left in flight when it stopped still reach
// the site through a proxy after wrk has exited.
func settledRuns(site string) (int64, error) {
	last, err := siteRuns(site)
	for end := time.Now().Add(5 * time.Second); err == nil && time.Now().Before(end); {
		time.Sleep(200 * time.Millisecond)
		var n int64
		if n, err = siteRuns(site); err == nil && n == last {
			return n, nil
		}
		last = n
	}
	return last, err
}

// siteRuns reads how many webhooks the site process has executed.
func siteRuns(site string) (int64, error) {
	resp, err := http.Get(site + countPath)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

func runDeploy(o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	wrkBin, err := exec.LookPath("wrk")
	if err != nil {
		return fmt.Errorf("-mode deploy needs wrk (Debian: apt-get install wrk): %w", err)
	}
	load0 := loadavg()
	serveEnv = o.serveEnv
	r := &rig{}
	defer r.close()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "compare-deploy-")
	if err != nil {
		return err
	}
	r.defer_(func() { os.RemoveAll(dir) })
	script := filepath.Join(dir, "webhook.lua")
	if err := os.WriteFile(script, []byte(wrkScript(bodyA)), 0o644); err != nil {
		return err
	}
	p := newPoster(o.conns)
	r.defer_(p.close)

	site, err := startRole(roleSite, "")
	if err != nil {
		return err
	}
	r.defer_(site.stop)
	siteURL, _ := url.Parse(site.URL)
	closed := []dpath{{name: dName, url: site.URL + hookPath, mode: "unique", siteRuns: 1}}
	open := []dpath{{name: dOpenDirect, op: func(ctx context.Context, i int64) error {
		return p.post(ctx, site.URL+hookPath, "od"+strconv.FormatInt(i, 10), bodyA, wantStatus(200))
	}, siteRuns: 1}}

	bare, err := startRole(roleBare, site.URL)
	if err != nil {
		return err
	}
	r.defer_(bare.stop)
	closed = append(closed, dpath{name: dBare, url: bare.URL + hookPath, mode: "unique", servers: bare.CPU, siteRuns: 1})

	if ng, err := startNginx(siteURL.Host, 32); err != nil { // keepalive 2 × 32 = 64
		r.notes = append(r.notes, "nginx: not measured ("+err.Error()+")")
	} else {
		r.defer_(ng.Close)
		closed = append(closed, dpath{name: dNginx, url: ng.URL + hookPath, mode: "unique", siteRuns: 1,
			servers: func() time.Duration { return treeCPU([]int{ng.PID()}) }})
		r.notes = append(r.notes, "nginx: "+cmdVersion("nginx", "-v")+", worker_processes auto, upstream keepalive 64, proxy_http_version 1.1, access_log off")
	}

	bin, err := buildHookonce(dir)
	if err != nil {
		return err
	}
	serveIn := func(name, store string, contractYAML ...string) (*serveProc, error) {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		cfg := config
		if len(contractYAML) > 0 {
			cfg = contractYAML[0]
		}
		sp, err := startServeWith(bin, d, site.URL, store, cfg)
		if err != nil {
			return nil, fmt.Errorf("hookonce serve (%s): %w", name, err)
		}
		r.defer_(sp.stop)
		return sp, nil
	}

	// PostgreSQL: the serve process the pass-through, duplicates and new
	// events go through (one process, so that its CPU per pass-through and
	// per new event compare), and the floor on its database.
	var pgServe *serveProc
	if srv, err := pgtest.StartServer(pgtest.Options{Durable: true, Settings: pgSettingsMap()}); err != nil {
		r.notes = append(r.notes, "PostgreSQL: not measured ("+err.Error()+")")
	} else {
		r.defer_(func() { srv.Close() })
		pgCPU := func() time.Duration { return treeCPU([]int{postmasterPID(srv)}) }
		dsn, err := srv.CreateDatabase(ctx, "serve")
		if err != nil {
			return err
		}
		poolOpt := fmt.Sprintf("&pool_max_conns=%d", o.conns)
		pgServe, err = serveIn("postgres", dsn+poolOpt)
		if err != nil {
			return err
		}
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			return err
		}
		r.defer_(pool.Close)
		ckpt := func() error { return checkpoint(pool) }
		if err := seed(p, pgServe.URL+hookPath, "dup-"); err != nil {
			return err
		}
		closed = append(closed,
			dpath{name: dPass, url: pgServe.URL + passPath, mode: "unique", hookonce: pgServe.CPU, proc: pgServe, siteRuns: 1},
			dpath{name: dDup, url: pgServe.URL + hookPath, mode: "dup", hookonce: pgServe.CPU, proc: pgServe, servers: pgCPU, siteRuns: 0},
			dpath{name: dNewPG, url: pgServe.URL + hookPath, mode: "unique", hookonce: pgServe.CPU, proc: pgServe, servers: pgCPU, before: ckpt, siteRuns: 1})
		open = append(open, dpath{name: dOpenNewPG, op: newEvents(p, pgServe.URL+hookPath, "onew-"),
			hookonce: pgServe.CPU, servers: pgCPU, before: ckpt, siteRuns: 1})
		r.notes = append(r.notes, fmt.Sprintf("PostgreSQL: %s; settings (docs/stores.md, Settings for production, scaled to this machine): %s; the serve process's pool_max_conns=%d",
			pgVersion(), pgSettingsText(), o.conns))

		// The floor: hookonce's own statements with the values of an event
		// the serve process stored.
		c, err := contract.Parse([]byte(config), "compare.yaml")
		if err != nil {
			return err
		}
		sender := c.Senders[0]
		const sampleKey = "floor-sample"
		if err := p.post(ctx, pgServe.URL+hookPath, sampleKey, bodyA, wantReplay(false)); err != nil {
			return fmt.Errorf("the floor's sample event: %w", err)
		}
		ev, err := readSample(ctx, pool, sender.Name, sampleKey, sender.Lease, sender.TTL)
		if err != nil {
			return err
		}
		pgbin, err := pgtest.BinDir()
		if err != nil {
			return err
		}
		if pb, err := pgbenchBin(pgbin); err != nil {
			r.notes = append(r.notes, "pgbench: not measured ("+err.Error()+")")
		} else {
			sql, err := floorScript("pgbench", ev)
			if err != nil {
				return err
			}
			file := filepath.Join(dir, "floor.sql")
			if err := os.WriteFile(file, []byte(sql), 0o644); err != nil {
				return err
			}
			pgb := func(rate float64, d time.Duration) sample {
				n0, err0 := unfinished(ctx, pool, "pgbench")
				s := runPgbench(pb, file, srv.Port(), "serve", o.conns, rate, d)
				n1, err1 := unfinished(ctx, pool, "pgbench")
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
			closed = append(closed, dpath{name: fmt.Sprintf(dPgbench, o.conns), external: pgb, before: ckpt, servers: pgCPU, siteRuns: -1})
			open = append(open, dpath{name: fmt.Sprintf(dPgbenchRate, o.rate), external: pgb, before: ckpt, siteRuns: -1})
			r.notes = append(r.notes, fmt.Sprintf("the floor: hookonce's own statements of a new event (dedupe/postgres.NewEventStatements, the first try and Complete's fenced UPDATE, each its own commit) with the values of an event the serve process stored (%s), a new key and owner per event, from real pgbench (%s) -M prepared -c %d -j 2 (open loop -R %.0f) on the serve process's database",
				ev, cmdVersion(pb, "--version"), o.conns, o.rate))
		}
	}

	// SQLite: serve's default (synchronous=FULL) and the opt-out.
	sqFull, err := serveIn("sqlite-full", "sqlite:"+filepath.Join(dir, "sqlite-full", "hookonce.db"))
	if err != nil {
		return err
	}
	sqNormal, err := serveIn("sqlite-normal", "sqlite:"+filepath.Join(dir, "sqlite-normal", "hookonce.db")+"?synchronous=normal")
	if err != nil {
		return err
	}
	sqDurable, err := serveIn("sqlite-durable", "sqlite:"+filepath.Join(dir, "sqlite-durable", "hookonce.db"), durableConfig)
	if err != nil {
		return err
	}
	// Issue 46: a notify: whose channels are down, beside none, under the
	// same mix of new events and refusals (notifydown.go).
	down, err := startBlackhole()
	if err != nil {
		return err
	}
	r.defer_(down.close)
	ndir := filepath.Join(dir, "sqlite-notify")
	if err := os.MkdirAll(ndir, 0o755); err != nil {
		return err
	}
	nc, err := notifyDownConfig(ndir, down.URL())
	if err != nil {
		return err
	}
	sqNotify, err := serveIn("sqlite-notify", "sqlite:"+filepath.Join(ndir, "hookonce.db"), nc)
	if err != nil {
		return err
	}
	var refusedPlain, refusedNotify atomic.Int64
	closed = append(closed,
		dpath{name: dNewSQ, url: sqFull.URL + hookPath, mode: "unique", hookonce: sqFull.CPU, proc: sqFull, siteRuns: 1},
		dpath{name: dNewSQNormal, url: sqNormal.URL + hookPath, mode: "unique", hookonce: sqNormal.CPU, proc: sqNormal, siteRuns: 1},
		dpath{name: dNewSQDurable, url: sqDurable.URL + hookPath, mode: "unique", hookonce: sqDurable.CPU, proc: sqDurable, siteRuns: 1, drain: sqDurable})
	open = append(open,
		dpath{name: dOpenNewSQ, op: newEvents(p, sqFull.URL+hookPath, "osq-"), hookonce: sqFull.CPU, siteRuns: 1},
		dpath{name: dOpenNewSQDurable, op: newEvents(p, sqDurable.URL+hookPath, "odur-"), hookonce: sqDurable.CPU, siteRuns: 1, drain: sqDurable},
		dpath{name: dOpenMixSQ, op: mixedEvents(p, sqFull.URL+hookPath, "omix-", &refusedPlain), hookonce: sqFull.CPU, siteRuns: 1, refused: &refusedPlain},
		dpath{name: dOpenMixNotify, op: mixedEvents(p, sqNotify.URL+hookPath, "onot-", &refusedNotify), hookonce: sqNotify.CPU, siteRuns: 1, refused: &refusedNotify})
	r.notes = append(r.notes, fmt.Sprintf("issue 46, a notify channel down: a SQLite serve process (FULL) whose notify: telegram api_url and webhook url go to a loopback port that accepts and never answers (refusals: count 1 within 1m, interval 1s, digest_wait 1ms; a try times out after 20 s), and the default SQLite serve process without notify:, under the open loop's new events with one request in %d sent without its X-Event-Id (refused 400, missing key: refusal notices all along); both p99s are over all requests of the mix", refusedEvery))
	r.notes = append(r.notes, fmt.Sprintf("hookonce serve: built from this checkout (go build), each store its own process with serve's defaults (replay cache on, --log-level %s), the contract of one sender keyed on X-Event-Id; the SQLite files in %s", serveLogLevel, os.TempDir()))
	if len(serveEnv) > 0 {
		r.notes = append(r.notes, fmt.Sprintf("**an experiment, not serve's defaults:** every serve process had %s in its environment (-serve-env)", strings.Join(serveEnv, ", ")))
	}
	r.notes = append(r.notes, fmt.Sprintf("load: %s, -t %d -c %d, a ~1 KB JSON POST, a header set per request by the same Lua script on every path (a new X-Event-Id per request; duplicates: one of 256 ids stored before); the site and the bare proxy: this program started again in a role (its own process); the site counts the webhooks it executes, and every run is checked against wrk's count (each new event and each forwarded request executed once, duplicates never)",
		wrkVersion(wrkBin), o.wrkThreads, o.conns))

	if o.only != nil {
		closed, open = keep(closed, o.only), keep(open, o.only)
	}
	if o.serveProf != "" {
		if err := os.MkdirAll(o.serveProf, 0o755); err != nil {
			return err
		}
	}
	profiled := map[string]bool{}
	measure := func(pt dpath, rate float64, d time.Duration) dsample {
		var out dsample
		if pt.before != nil {
			if err := pt.before(); err != nil {
				out.Errors, out.FirstErr = 1, err.Error()
				return out
			}
		}
		read := func(f func() time.Duration) time.Duration {
			if f == nil {
				return 0
			}
			return f()
		}
		if rate == 0 && pt.external == nil && d > time.Second {
			runWrk(wrkBin, script, pt.url, o.wrkThreads, o.conns, time.Second, "warm"+strconv.FormatInt(seq.Add(1), 10), pt.mode)
		}
		pt.drainOwed()
		r0, errR0 := settledRuns(site.URL) // the warm-up's last requests done
		var ref0 int64
		if pt.refused != nil {
			ref0 = pt.refused.Load()
		}
		h0, s0, v0 := read(pt.hookonce), site.CPU(), read(pt.servers)
		var sw0 int64
		swOK := false
		if pt.proc != nil {
			sw0, swOK = pt.proc.switches()
		}
		switch {
		case pt.external != nil:
			out.sample = pt.external(rate, d)
			out.loadCPU = out.SelfCPU
		case rate > 0:
			c0 := selfCPU()
			out.sample = openLoop(rate, d, pt.op, meters{})
			out.loadCPU = selfCPU() - c0
		default:
			var profDone chan error
			if o.serveProf != "" && pt.proc != nil && !profiled[pt.name] {
				profiled[pt.name] = true
				profDone = make(chan error, 1)
				file := filepath.Join(o.serveProf, profFile(pt.name))
				go func() { profDone <- pt.proc.cpuProfile(d, file) }()
			}
			out.sample = runWrk(wrkBin, script, pt.url, o.wrkThreads, o.conns, d, "r"+strconv.FormatInt(seq.Add(1), 10), pt.mode)
			out.loadCPU = out.SelfCPU
			if profDone != nil {
				if err := <-profDone; err != nil {
					fmt.Fprintf(os.Stderr, "-serveprofile %s: %v\n", pt.name, err)
				}
			}
		}
		out.hookonceCPU, out.siteCPU, out.serversCPU = read(pt.hookonce)-h0, site.CPU()-s0, read(pt.servers)-v0
		out.switches = -1
		if swOK {
			if sw1, ok := pt.proc.switches(); ok {
				out.switches = sw1 - sw0
			}
		}
		pt.drainOwed()
		r1, errR1 := settledRuns(site.URL)
		out.siteRuns = r1 - r0
		want := out.Requests // each reaches the site once
		if pt.refused != nil {
			want -= pt.refused.Load() - ref0
		}
		if pt.siteRuns >= 0 && out.Requests > 0 {
			var bad string
			switch {
			case errors.Join(errR0, errR1) != nil:
				bad = "site count: " + errors.Join(errR0, errR1).Error()
			case pt.siteRuns == 0 && out.siteRuns != 0:
				bad = fmt.Sprintf("%d duplicates reached the site", out.siteRuns)
			case pt.siteRuns == 1 && (out.siteRuns < want || out.siteRuns > want+int64(o.conns)):
				// wrk counts the answers it read; the requests in flight
				// when it stopped reached the site too (at most one per
				// connection).
				bad = fmt.Sprintf("the site executed %d webhooks for %d answered requests meant to reach it", out.siteRuns, want)
			}
			if bad != "" {
				out.Errors++
				if out.FirstErr == "" {
					out.FirstErr = bad
				}
			}
		}
		return out
	}
	closedRes, openRes := map[string][]dsample{}, map[string][]dsample{}
	for round := range o.rounds {
		for _, pt := range abba(closed, round) {
			fmt.Fprintf(os.Stderr, "round %d/%d wrk: %s\n", round+1, o.rounds, pt.name)
			closedRes[pt.name] = append(closedRes[pt.name], measure(pt, 0, o.duration))
		}
	}
	for round := range o.rounds {
		for _, pt := range abba(open, round) {
			fmt.Fprintf(os.Stderr, "round %d/%d open loop %.0f/s: %s\n", round+1, o.rounds, o.rate, pt.name)
			openRes[pt.name] = append(openRes[pt.name], measure(pt, o.rate, o.openDur))
		}
	}
	rep := deployReport{opts: o, load0: load0, load1: loadavg(), notes: r.notes}
	if fails, err := sqNotify.metricSum("hookonce_notify_failures_total"); err != nil {
		rep.notifyDown = "notify failures not read: " + err.Error()
	} else {
		rep.notifyDown = fmt.Sprintf("%.0f notify sends failed, %d connections left unanswered", fails, down.n.Load())
	}
	for _, pt := range closed {
		rep.closed = append(rep.closed, summarizeD(pt.name, closedRes[pt.name]))
	}
	for _, pt := range open {
		rep.open = append(rep.open, summarizeD(pt.name, openRes[pt.name]))
	}
	md := rep.markdown()
	fmt.Print(md)
	if o.only != nil {
		return nil
	}
	return os.WriteFile(filepath.Join(o.out, "deploy.md"), []byte(md), 0o644)
}

func (p dpath) pathName() string { return p.name }

// dsummary is the median over rounds of one deployment-mode path.
type dsummary struct {
	summary
	hookonceCPU, siteCPU, serversCPU, loadCPU time.Duration // per request
	siteRunsPerReq                            float64
	switchesPerReq                            float64 // the serve process's context switches (-1: not counted)
}

func summarizeD(name string, ss []dsample) dsummary {
	var plain []sample
	var h, st, sv, ld []time.Duration
	var runs, sw []float64
	for _, s := range ss {
		plain = append(plain, s.sample)
		if s.Requests > 0 {
			n := time.Duration(s.Requests)
			h, st, sv, ld = append(h, s.hookonceCPU/n), append(st, s.siteCPU/n), append(sv, s.serversCPU/n), append(ld, s.loadCPU/n)
			runs = append(runs, float64(s.siteRuns)/float64(s.Requests))
			if s.switches >= 0 {
				sw = append(sw, float64(s.switches)/float64(s.Requests))
			}
		}
	}
	out := dsummary{summary: summarize(name, plain)}
	for _, s := range ss {
		out.max = max(out.max, s.Max)
	}
	out.hookonceCPU, out.siteCPU, out.serversCPU, out.loadCPU = median(h), median(st), median(sv), median(ld)
	out.siteRunsPerReq = median(runs)
	out.switchesPerReq = -1
	if len(sw) > 0 {
		out.switchesPerReq = median(sw)
	}
	return out
}

type deployReport struct {
	opts         options
	load0, load1 string
	notes        []string
	closed, open []dsummary
	notifyDown   string // what the notify-down serve process's channels went through
}

func findD(ss []dsummary, name string) (dsummary, bool) {
	for _, s := range ss {
		if s.name == name {
			return s, true
		}
	}
	return dsummary{}, false
}

func msOr(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	return ms(d)
}

func usOr(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	return us(d)
}

func (r deployReport) markdown() string {
	var b strings.Builder
	o := r.opts
	fmt.Fprintf(&b, "## hookonce as deployed (go run -tags benchcompare ./bench/compare -mode deploy)\n\n")
	fmt.Fprintf(&b, "%s; %d CPUs (%s); %s/%s, %s. Load average before: %s; after: %s.\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), cpuModel(), runtime.GOOS, runtime.GOARCH, runtime.Version(), r.load0, r.load1)
	fmt.Fprintf(&b, "Closed loop: wrk -t %d -c %d, %s per path per round (after a 1 s warm-up when rounds are longer), %d round(s) in ABBA order, medians shown. Everything on 127.0.0.1, each server its own process, sharing this machine's cores.\n\n",
		o.wrkThreads, o.conns, o.duration, o.rounds)
	for _, n := range r.notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	b.WriteString("\n")
	var ngRPS float64
	if ng, ok := findD(r.closed, dNginx); ok {
		ngRPS = ng.rps
	}
	b.WriteString("| Path | req/s | × nginx | p50 | p99 | p99.9 | max | CPU/req: hookonce serve | site | other servers¹ | load generator² | serve's context switches/req³ | site runs/req | errors |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.closed {
		ratio := "–"
		if ngRPS > 0 {
			ratio = fmt.Sprintf("%.2f×", s.rps/ngRPS)
		}
		sw := "–"
		if s.switchesPerReq >= 0 {
			sw = fmt.Sprintf("%.2f", s.switchesPerReq)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %s |\n", s.name, s.rps, ratio, ms(s.p50), ms(s.p99), ms(s.p999), msOr(s.max),
			usOr(s.hookonceCPU), usOr(s.siteCPU), usOr(s.serversCPU), usOr(s.loadCPU), sw, s.siteRunsPerReq, errCell(s.summary))
	}
	b.WriteString("\n¹ nginx (master and workers), the bare proxy's process, or PostgreSQL (postmaster and backends; for pgbench not counted: its backends exit with it), from /proc. ² wrk or pgbench (a child of this program, getrusage), or this program sending the open loop. ³ the serve process's threads switched out (voluntary and not, /proc/PID/task/*/status): each is the kernel's switch plus a wake-up to come back, a cost Go's CPU profile does not show (docs/performance.md, round 5).\n\n")
	if len(r.open) > 0 {
		fmt.Fprintf(&b, "Open loop: %.0f requests/s offered for %s per path per round, sent by this program (wrk holds no rate), latency from when each request was due; the floor: pgbench -R.\n\n", o.rate, o.openDur)
		b.WriteString("| Path | answered/s | p50 | p99 | p99.9 | max | CPU/req: hookonce serve | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, s := range r.open {
			fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s | %s | %s | %s |\n", s.name, s.rps, ms(s.p50), ms(s.p99), ms(s.p999), msOr(s.max), usOr(s.hookonceCPU), errCell(s.summary))
		}
		b.WriteString("\n")
	}
	b.WriteString(r.goals())
	return b.String()
}

// goals judges the goals on this run; a goal whose paths were not
// measured (or failed) is left out.
func (r deployReport) goals() string {
	var rows []string
	row := func(goal, measured string, met bool) {
		mark := "NOT met"
		if met {
			mark = "met"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s |", goal, measured, mark))
	}
	ok := func(ss []dsummary, name string) (dsummary, bool) {
		s, found := findD(ss, name)
		return s, found && s.errors == 0 && s.rps > 0
	}
	ng, okNg := ok(r.closed, dNginx)
	bare, okBare := ok(r.closed, dBare)
	pgb, okPgb := ok(r.closed, fmt.Sprintf(dPgbench, r.opts.conns))
	if d, okD := ok(r.closed, dDup); okD && okNg {
		row("duplicates ≥ 1.15× nginx proxy_pass (keepalive)", fmt.Sprintf("%.0f vs %.0f req/s: %.2f×", d.rps, ng.rps, d.rps/ng.rps), d.rps >= 1.15*ng.rps)
	}
	if n, okN := ok(r.closed, dNewPG); okN && okBare && okPgb {
		composite := 1 / (1/bare.rps + 1/pgb.rps)
		row("new events, PostgreSQL ≥ 1.1× the composite floor 1/(1/bare proxy + 1/pgbench pair)",
			fmt.Sprintf("%.0f vs 1/(1/%.0f + 1/%.0f) = %.0f req/s: %.2f×", n.rps, bare.rps, pgb.rps, composite, n.rps/composite), n.rps >= 1.1*composite)
	}
	pass, okP := ok(r.closed, dPass)
	if n, okN := ok(r.closed, dNewPG); okN && okP && pass.hookonceCPU > 0 {
		ratio := float64(n.hookonceCPU) / float64(pass.hookonceCPU)
		row("hookonce serve's CPU per new event (PostgreSQL) ≤ 1.8× per pass-through request",
			fmt.Sprintf("%s vs %s: %.2f×", us(n.hookonceCPU), us(pass.hookonceCPU), ratio), ratio <= 1.8)
	}
	dir, ok1 := ok(r.open, dOpenDirect)
	hoo, ok2 := ok(r.open, dOpenNewPG)
	pair, ok3 := ok(r.open, fmt.Sprintf(dPgbenchRate, r.opts.rate))
	if ok1 && ok2 && ok3 {
		added := hoo.p99 - dir.p99
		row(fmt.Sprintf("added p99 at %.0f new events/s (PostgreSQL) ≤ the store pair's own p99 (pgbench -R) + 2 ms", r.opts.rate),
			fmt.Sprintf("+%s (%s − %s) vs %s + 2 ms", ms(added), ms(hoo.p99), ms(dir.p99), ms(pair.p99)), added <= pair.p99+2*time.Millisecond)
	}
	if okP && okBare {
		row("(pass-through ≥ 1.0× the bare proxy)", fmt.Sprintf("%.0f vs %.0f req/s: %.2f×", pass.rps, bare.rps, pass.rps/bare.rps), pass.rps >= bare.rps)
	}
	full, okF := ok(r.closed, dNewSQ)
	normal, okN := ok(r.closed, dNewSQNormal)
	if okF && okN {
		row("(SQLite synchronous=FULL costs < 15% of new-event throughput against NORMAL)",
			fmt.Sprintf("%.0f vs %.0f req/s: %.2f×", full.rps, normal.rps, full.rps/normal.rps), full.rps >= 0.85*normal.rps)
	}
	sync, okS := ok(r.open, dOpenNewSQ)
	dur, okDur := ok(r.open, dOpenNewSQDurable)
	if okS && okDur {
		// Measured, not judged: the issue sets no goal for it.
		rows = append(rows, fmt.Sprintf("| (the durable acknowledgement at %.0f new events/s, SQLite: its added p50 and p99 over a synchronous claim) | p50 %s vs %s (%+.2f ms), p99 %s vs %s (%+.2f ms) | measured |",
			r.opts.rate, ms(dur.p50), ms(sync.p50), float64(dur.p50-sync.p50)/1e6, ms(dur.p99), ms(sync.p99), float64(dur.p99-sync.p99)/1e6))
	}
	plain, okPl := ok(r.open, dOpenMixSQ)
	noti, okNo := ok(r.open, dOpenMixNotify)
	if okPl && okNo {
		// Issue 46, judged against a bound written here: a channel down
		// adds at most 2 ms to the p99 of deliveries.
		added := noti.p99 - plain.p99
		row(fmt.Sprintf("(issue 46: with every notify channel down, p99 at %.0f/s, SQLite, 1 in %d refused, ≤ the same without notify: + 2 ms)", r.opts.rate, refusedEvery),
			fmt.Sprintf("%s vs %s (%+.2f ms); %s", ms(noti.p99), ms(plain.p99), float64(added)/1e6, r.notifyDown), added <= 2*time.Millisecond)
	}
	if len(rows) == 0 {
		return ""
	}
	return "Goals (issue 47), judged on this run:\n\n| Goal | Measured | |\n|---|---|---|\n" + strings.Join(rows, "\n") + "\n\n"
}

// profFile names a path's CPU profile: its name with everything but
// letters and digits made a dash.
func profFile(name string) string {
	b := []byte(strings.ToLower(name))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '-'
		}
	}
	return strings.Trim(regexp.MustCompile(`-+`).ReplaceAllString(string(b), "-"), "-") + ".pprof"
}
