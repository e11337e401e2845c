package faults_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
	"github.com/hookonce/hookonce/internal/testkit/servetest"
)

// soakConfig: as in the load runs.
const soakConfig = loadFaultConfig

// A soak (long form only): HOOKONCE_SOAK=2m runs a real `hookonce serve`
// under minutes of mixed traffic while its database is restarted every
// HOOKONCE_SOAK_RESTART_EVERY (default 20s; PostgreSQL by default,
// HOOKONCE_SOAK_STORE=redis for Redis with AOF, sqlite for no restarts),
// and reports duplicates, lost events, and the process's RSS, goroutines
// and open files over time. Expected, as in the short runs: no execution
// beyond the counted takeovers, no event lost, nothing left processing, no
// record missing; and no steady growth of goroutines.
//
//	HOOKONCE_SOAK=2m go test ./faults -run Soak -timeout 30m -v
func TestSoak(t *testing.T) {
	spec := os.Getenv("HOOKONCE_SOAK")
	if spec == "" {
		t.Skip("long form: set HOOKONCE_SOAK=2m (a duration) to run the soak")
	}
	duration, err := time.ParseDuration(spec)
	if err != nil || duration <= 0 {
		t.Fatalf("HOOKONCE_SOAK=%q: want a duration such as 2m", spec)
	}
	every := 20 * time.Second
	if v := os.Getenv("HOOKONCE_SOAK_RESTART_EVERY"); v != "" {
		if every, err = time.ParseDuration(v); err != nil || every <= 0 {
			t.Fatalf("HOOKONCE_SOAK_RESTART_EVERY=%q: want a duration", v)
		}
	}
	needBinary(t)

	kind := os.Getenv("HOOKONCE_SOAK_STORE")
	var dsn string
	var restart func()
	switch kind {
	case "", "postgres":
		kind = "postgres"
		srv := pgtest.Start(t)
		dsn = srv.NewDatabase(t) + "&connect_timeout=2"
		restart = func() {
			must(t, srv.Stop())
			time.Sleep(time.Second)
			must(t, srv.Start())
		}
	case "redis":
		srv := redistest.Start(t, "--appendonly", "yes")
		dsn = srv.URL()
		restart = func() {
			srv.Stop(t)
			time.Sleep(time.Second)
			srv.Start(t)
		}
	case "sqlite":
		dsn = "sqlite:" + t.TempDir() + "/hookonce.db"
	default:
		t.Fatalf("HOOKONCE_SOAK_STORE=%q: want postgres, redis or sqlite", kind)
	}

	s := newSite(t, answerOK(2*time.Millisecond))
	p := startServe(t, serveOpts{store: dsn, upstream: s.URL, config: soakConfig})
	store := servetest.OpenStore(t, dsn)
	stop := make(chan struct{})
	var progress atomic.Int64
	done := runLoad(t, loadConfig{
		url: p.URL + "/hooks/shop", prefix: "soak", workers: 4, maxEvents: 1_000_000,
		pace: 10 * time.Millisecond, together: 5, retryFor: 60 * time.Second, attempts: 1000,
		stop: stop, progress: &progress,
	})

	type sample struct {
		at                 time.Duration
		deliveries         int64
		rssKB, testRSSKB   int
		goroutines, fds    float64
		takeovers, refused float64
	}
	var (
		mu       sync.Mutex
		samples  []sample
		restarts int
	)
	take := func(began time.Time) {
		m := p.Metrics(t)
		mu.Lock()
		samples = append(samples, sample{
			at: time.Since(began).Round(time.Second), deliveries: progress.Load(),
			rssKB: vmRSS(t, strconv.Itoa(p.Pid())), testRSSKB: vmRSS(t, "self"),
			goroutines: counter(m, "go_goroutines"), fds: counter(m, "process_open_fds"),
			takeovers: counter(m, "hookonce_requests_total", "outcome", "takeover"),
			refused:   counter(m, "hookonce_requests_total", "outcome", "store_error"),
		})
		mu.Unlock()
	}
	began := time.Now()
	take(began)
	tick := time.NewTicker(10 * time.Second)
	nextRestart := time.Now().Add(every)
	for end := began.Add(duration); time.Now().Before(end); {
		select {
		case <-tick.C:
			take(began)
		case <-time.After(time.Until(nextRestart)):
			if restart != nil && time.Until(end) > 5*time.Second {
				restart()
				restarts++
			}
			nextRestart = time.Now().Add(every)
		case <-time.After(time.Until(end)):
		}
	}
	tick.Stop()
	close(stop)
	res := <-done
	take(began)

	reran, missing := lateDuplicates(t, store, s, p.URL+"/hooks/shop", res)
	rep := checkRun(t, store, s, res, loadLease, runExpect{extraAllowed: takeoversOnly})
	m := p.Metrics(t)
	var b strings.Builder
	fmt.Fprintf(&b, "soak on %s for %v, %d database restarts (every %v):\n", kind, duration, restarts, every)
	fmt.Fprintf(&b, "%s\n", rep)
	fmt.Fprintf(&b, "takeovers counted %v, answers not stored %v, store errors %v; late duplicates: %d records missing, %d ran again\n",
		counter(m, "hookonce_requests_total", "outcome", "takeover"), counter(m, "hookonce_answers_not_stored_total"),
		counter(m, "hookonce_requests_total", "outcome", "store_error"), missing, reran)
	fmt.Fprintf(&b, "%8s %11s %12s %12s %10s %6s %9s %8s\n", "t", "deliveries", "RSS (KiB)", "test RSS", "goroutines", "fds", "takeovers", "refused")
	for _, x := range samples {
		fmt.Fprintf(&b, "%8v %11d %12d %12d %10.0f %6.0f %9.0f %8.0f\n", x.at, x.deliveries, x.rssKB, x.testRSSKB, x.goroutines, x.fds, x.takeovers, x.refused)
	}
	t.Log("\n" + b.String())
	if missing != 0 || reran != 0 {
		t.Errorf("late duplicates: %d records missing, %d events ran again; want 0 and 0", missing, reran)
	}
	if rep.extra > int(counter(m, "hookonce_requests_total", "outcome", "takeover")) {
		t.Errorf("%d extra executions, fewer takeovers counted", rep.extra)
	}
	// Goroutines at the end, once idle, against the first sample: a leak
	// grows with the deliveries, which were thousands.
	if first, last := samples[0].goroutines, samples[len(samples)-1].goroutines; last > first+50 {
		t.Errorf("goroutines grew from %v to %v over the soak", first, last)
	}
	p.Terminate(t)
}

// vmRSS reads VmRSS (KiB) from /proc/<pid>/status.
func vmRSS(t testing.TB, pid string) int {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return -1
}
