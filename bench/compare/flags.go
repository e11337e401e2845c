// Command compare measures, in one run on one machine, what hookonce costs
// next to the things it is compared with: the site called directly, a bare
// httputil.ReverseProxy, nginx proxy_pass, and, for PostgreSQL, a floor:
// hookonce's own statements of a new event (postgres.NewEventStatements),
// each its own commit, sent straight to the server by pgx and by real
// pgbench -M prepared (floor.go). A real `hookonce serve` process measures
// hookonce's CPU apart from the load generator and the site.
//
//	go run -tags benchcompare ./bench/compare [-duration 5s] [-rounds 2] [-conns 32] [-rate 200] [-open-duration 10s] [-out bench/compare/results]
//	    [-only REGEXP] [-cpuprofile FILE] [-memprofile FILE]
//	go run -tags benchcompare ./bench/compare -mode deploy [-duration 4s] [-rounds 4] [-wrk-threads 2] …
//
// -mode deploy measures as a deployment runs (deploy.go): the built
// binary (`hookonce serve`, a process of its own, on SQLite and on
// PostgreSQL), the site, a bare reverse proxy and nginx each in a process
// of its own, real wrk as the closed-loop load and real pgbench for the
// floor; the goals are judged on that mode.
//
// Everything listens on 127.0.0.1 and runs on this machine: the load
// generator, the proxies and the site share its cores with the servers.
// Closed loop: -conns connections each POST a ~1 KB JSON webhook as soon as
// the last one was answered. Open loop: -rate requests/s whatever the
// answers' latency (latency measured from when each request was due).
// Rounds run the paths in ABBA order (forward, reversed, ...); every figure
// is the median over rounds. It is a program, not a test: go test ./...
// never runs it (only its flag parsing is tested).
//
// It is built only with the benchcompare build tag, because it wires the
// store backends and the internal test servers (internal/testkit/pgtest,
// internal/testkit/redistest) into a program, which ARCHITECTURE.md's import rules
// (arch_test.go) allow only to internal/cli and to tests. Without the tag
// the command checks its flags and says how to run it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// options are the command line.
type options struct {
	duration   time.Duration
	rounds     int
	conns      int
	rate       float64
	openDur    time.Duration // measured time of each open-loop path per round
	out        string
	only       *regexp.Regexp // measure only the paths whose name matches
	cpuprof    string         // write a CPU profile of the measured runs here
	memprof    string         // write an allocation profile at the end here
	mode       string         // "inprocess" (default) or "deploy"
	wrkThreads int            // deploy mode: wrk's -t
	serveProf  string         // deploy mode: write the serve processes' CPU profiles (first round) here
	serveEnv   []string       // deploy mode: extra environment of the serve processes (experiments)
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured time of each path in each round")
	fs.IntVar(&o.rounds, "rounds", 2, "rounds, in ABBA order; figures are medians over rounds")
	fs.IntVar(&o.conns, "conns", 32, "closed-loop connections")
	fs.Float64Var(&o.rate, "rate", 200, "open-loop requests per second")
	fs.DurationVar(&o.openDur, "open-duration", 10*time.Second, "measured time of each open-loop path in each round (its p99 needs a few thousand requests)")
	fs.StringVar(&o.out, "out", "bench/compare/results", "folder for results.md and chart.svg")
	only := fs.String("only", "", "measure only the paths whose name matches this regular expression (results are then not written)")
	fs.StringVar(&o.cpuprof, "cpuprofile", "", "write a CPU profile of the whole run (load generator and site included) to this file")
	fs.StringVar(&o.memprof, "memprofile", "", "write an allocation profile of the whole run to this file")
	fs.StringVar(&o.mode, "mode", "inprocess", "inprocess: hookonce's handler inside this Go load process; deploy: the built binary in its own process under wrk (defaults then -duration 4s -rounds 4)")
	fs.IntVar(&o.wrkThreads, "wrk-threads", 2, "deploy mode: wrk threads (-t)")
	fs.StringVar(&o.serveProf, "serveprofile", "", "deploy mode: write a CPU profile of the serve process during the first round of each hookonce path to this folder (from its admin listener's /debug/pprof)")
	env := fs.String("serve-env", "", "deploy mode: extra environment of the serve processes, KEY=VALUE[,KEY=VALUE…] (experiments such as GOGC=200; the report names it)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.mode == "deploy" {
		if !set["duration"] {
			o.duration = 4 * time.Second
		}
		if !set["rounds"] {
			o.rounds = 4
		}
	}
	if *env != "" {
		for _, kv := range strings.Split(*env, ",") {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return o, fmt.Errorf("-serve-env: %q is not KEY=VALUE", kv)
			}
			o.serveEnv = append(o.serveEnv, kv)
		}
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return o, fmt.Errorf("-only: %w", err)
		}
		o.only = re
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	case o.duration <= 0:
		return o, errors.New("-duration must be positive")
	case o.rounds < 1:
		return o, errors.New("-rounds must be at least 1")
	case o.conns < 1:
		return o, errors.New("-conns must be at least 1")
	case o.rate <= 0:
		return o, errors.New("-rate must be positive")
	case o.openDur <= 0:
		return o, errors.New("-open-duration must be positive")
	case o.mode != "inprocess" && o.mode != "deploy":
		return o, fmt.Errorf("-mode %q: want inprocess or deploy", o.mode)
	case o.wrkThreads < 1 || o.wrkThreads > o.conns:
		return o, errors.New("-wrk-threads must be between 1 and -conns")
	}
	return o, nil
}
