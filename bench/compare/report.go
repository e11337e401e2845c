//go:build benchcompare

package main

import (
	"fmt"
	"html"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"
)

// summary is the median over rounds of one path's figures.
type summary struct {
	name            string
	rounds          int
	rps             float64
	p50, p99, p999  time.Duration
	selfCPU, srvCPU time.Duration // per request
	procCPU         time.Duration // per request, the hookonce serve process (0: none)
	errors          int64
	firstErr        string
	// The open loop's worst round: its slowest request, and the longest
	// GC pause and scheduling wait of this process and the steal time
	// (tails.go) in any round.
	max   time.Duration
	tails tails
}

func median[T int64 | float64 | time.Duration](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := append([]T(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func summarize(name string, ss []sample) summary {
	out := summary{name: name, rounds: len(ss)}
	var rps []float64
	var p50, p99, p999, self, srv, proc []time.Duration
	for _, s := range ss {
		rps = append(rps, s.rps())
		p50, p99, p999 = append(p50, s.P50), append(p99, s.P99), append(p999, s.P999)
		if s.Requests > 0 {
			self = append(self, s.SelfCPU/time.Duration(s.Requests))
			srv = append(srv, s.ServerCPU/time.Duration(s.Requests))
			proc = append(proc, s.ProcCPU/time.Duration(s.Requests))
		}
		out.max = max(out.max, s.Max)
		out.tails.gcPause = max(out.tails.gcPause, s.Tails.gcPause)
		out.tails.schedWait = max(out.tails.schedWait, s.Tails.schedWait)
		out.tails.gcs += s.Tails.gcs
		out.tails.steal += s.Tails.steal
		out.errors += s.Errors
		if out.firstErr == "" {
			out.firstErr = s.FirstErr
		}
	}
	out.rps, out.p50, out.p99, out.p999 = median(rps), median(p50), median(p99), median(p999)
	out.selfCPU, out.srvCPU, out.procCPU = median(self), median(srv), median(proc)
	return out
}

type report struct {
	opts         options
	load0, load1 string
	notes        []string
	bareName     string
	closed, open []summary
	flood        *flood
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }

func (r report) markdown() string {
	var b strings.Builder
	o := r.opts
	fmt.Fprintf(&b, "## hookonce compared (go run -tags benchcompare ./bench/compare)\n\n")
	fmt.Fprintf(&b, "%s; %d CPUs (%s); %s/%s, %s. Load average before: %s; after: %s.\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), cpuModel(), runtime.GOOS, runtime.GOARCH, runtime.Version(), r.load0, r.load1)
	fmt.Fprintf(&b, "Closed loop: %d connections, each POSTing a ~1 KB JSON webhook as soon as the last was answered; %s measured per path per round after a warm-up, %d round(s) in ABBA order, medians shown.\n",
		o.conns, o.duration, o.rounds)
	fmt.Fprintf(&b, "Load generator, site, Go proxies and servers share this machine's cores, on 127.0.0.1. hookonce runs in-process with the replay cache, as serve wires it, except on the rows \"hookonce serve (own process)\": a real serve process.\n\n")
	for _, n := range r.notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	if len(r.notes) > 0 {
		b.WriteString("\n")
	}
	var base float64
	for _, s := range r.closed {
		if s.name == r.bareName {
			base = s.rps
		}
	}
	b.WriteString("| Path | req/s | vs bare proxy | p50 | p99 | p99.9 | CPU/req, this process¹ | CPU/req, servers² | CPU/req, hookonce process³ | errors |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.closed {
		ratio := "–"
		if base > 0 {
			ratio = fmt.Sprintf("%.2f×", s.rps/base)
		}
		srv, proc := "–", "–"
		if s.srvCPU > 0 {
			srv = us(s.srvCPU)
		}
		if s.procCPU > 0 {
			proc = us(s.procCPU)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.name, s.rps, ratio, ms(s.p50), ms(s.p99), ms(s.p999), us(s.selfCPU), srv, proc, errCell(s))
	}
	fmt.Fprintf(&b, "\n¹ user+system CPU time of the whole Go process (getrusage) over the run divided by requests answered: it includes the load generator and the in-process site, so it is an upper bound on what the proxy itself costs (on the hookonce serve rows it is the load generator and the site alone). ² CPU time of the external server processes (nginx master and workers, postgres and its backends, redis-server) from /proc, divided by requests; for real pgbench, the first column is pgbench's own CPU (a child process) and the server's is not counted (its backends exit with pgbench). ³ CPU time of the `hookonce serve` process alone (/proc, its PID), divided by requests: what hookonce itself costs, without the load generator and the site.\n\n")
	if len(r.open) > 0 {
		fmt.Fprintf(&b, "Open loop: %.0f requests/s offered for %s per path per round, latency from when each request was due.\n\n", o.rate, o.openDur)
		b.WriteString("| Path | answered/s | p50 | p99 | p99.9 | max | GC cycles, longest pause⁴ | longest scheduling wait⁴ | steal⁵ | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, s := range r.open {
			mx, gc, sched, steal := ms(s.max), fmt.Sprintf("%d, ≤ %s", s.tails.gcs, ms(s.tails.gcPause)), "≤ "+ms(s.tails.schedWait), ms(s.tails.steal)
			if s.max == 0 { // an external load generator (pgbench): its own log gives no maximum, and this process is idle
				mx, gc, sched, steal = "–", "–", "–", "–"
			}
			fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.name, s.rps, ms(s.p50), ms(s.p99), ms(s.p999), mx, gc, sched, steal, errCell(s))
		}
		b.WriteString("\n⁴ this process (load generator, site and the in-process hookonce), all rounds: the Go runtime's histograms (/gc/pauses, /sched/latencies), the upper bound of the highest bucket reached; a scheduling wait is a runnable goroutine waiting for a thread. ⁵ CPU time the hypervisor gave to other guests over the rounds (/proc/stat, all CPUs). max is the slowest request of the worst round.\n\n")
	}
	if r.flood != nil {
		b.WriteString(r.flood.markdown() + "\n")
	}
	b.WriteString(r.targets())
	fmt.Fprintf(&b, "Chart: chart.svg (closed-loop req/s per path).\n")
	return b.String()
}

func errCell(s summary) string {
	if s.errors == 0 {
		return "0"
	}
	e := s.firstErr
	if len(e) > 80 {
		e = e[:80] + "…"
	}
	return fmt.Sprintf("%d (%s)", s.errors, strings.ReplaceAll(e, "|", "/"))
}

// svg is a horizontal bar chart of closed-loop req/s per path.
func (r report) svg() string {
	const (
		labelW = 380
		barW   = 420
		rowH   = 30
		top    = 50
	)
	maxRPS := 1.0
	for _, s := range r.closed {
		maxRPS = max(maxRPS, s.rps)
	}
	h := top + rowH*len(r.closed) + 30
	w := labelW + barW + 90
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="13">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15" font-weight="bold">Requests/s, closed loop, %d connections, median of %d round(s) of %s</text>`+"\n", r.opts.conns, r.opts.rounds, r.opts.duration)
	fmt.Fprintf(&b, `<text x="10" y="40" fill="#555">%d CPUs, everything on one machine (load average before %s)</text>`+"\n", runtime.NumCPU(), html.EscapeString(r.load0))
	for i, s := range r.closed {
		y := top + i*rowH
		bw := int(float64(barW) * s.rps / maxRPS)
		color := "#4a78b5"
		switch {
		case strings.HasPrefix(s.name, "hookonce"):
			color = "#d9822b"
		case strings.HasPrefix(s.name, "store only"):
			color = "#f0b27a"
		case strings.HasPrefix(s.name, "reference"):
			color = "#7a7a7a"
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-8, y+18, html.EscapeString(s.name))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", labelW, y+4, max(bw, 1), rowH-8, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%.0f</text>`+"\n", labelW+max(bw, 1)+6, y+18, s.rps)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func cmdVersion(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return name + " (version unknown)"
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

func find(ss []summary, name string) (summary, bool) {
	for _, s := range ss {
		if s.name == name {
			return s, true
		}
	}
	return summary{}, false
}

// targets judges this run's figures against the performance targets
// (docs/performance.md); a target whose paths were not measured
// is left out.
func (r report) targets() string {
	var rows []string
	row := func(target, measured string, met bool) {
		mark := "not met"
		if met {
			mark = "met"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s |", target, measured, mark))
	}
	bare, okBare := find(r.closed, nameBare)
	direct, okDirect := find(r.closed, nameDirect)
	pgb, okPgb := find(r.closed, fmt.Sprintf(namePgbench, r.opts.conns))
	floor := fmt.Sprintf("the pgbench floor (hookonce's first try + completion, each its own commit, -M prepared, %d clients)", r.opts.conns)
	if n, ok := find(r.closed, nameNewPG); ok && okPgb && okBare {
		// A new event is a proxy hop and the store's pair of statements:
		// the composite floor is the rate of doing both, one after the
		// other, on the same machine.
		composite := 1 / (1/bare.rps + 1/pgb.rps)
		row("new events, PostgreSQL ≥ 1.0× the composite floor (a bare proxy hop, then "+floor+": 1/(1/bare + 1/pgbench))",
			fmt.Sprintf("%.0f vs 1/(1/%.0f + 1/%.0f) = %.0f req/s: %.2f×", n.rps, bare.rps, pgb.rps, composite, n.rps/composite), n.rps >= composite)
	}
	if n, ok := find(r.closed, nameNewPG); ok && okPgb {
		row("(new events, PostgreSQL, against "+floor+" alone)", fmt.Sprintf("%.0f vs %.0f req/s: %.2f×", n.rps, pgb.rps, n.rps/pgb.rps), n.rps >= pgb.rps)
	}
	if n, ok := find(r.closed, nameStorePG); ok && okPgb {
		row("(the same, store only, no HTTP)", fmt.Sprintf("%.0f vs %.0f: %.2f×", n.rps, pgb.rps, n.rps/pgb.rps), n.rps >= pgb.rps)
	}
	if n, ok := find(r.closed, nameNewSQLite); ok && okPgb {
		row("new events, SQLite ≥ the pgbench floor", fmt.Sprintf("%.0f vs %.0f req/s: %.2f×", n.rps, pgb.rps, n.rps/pgb.rps), n.rps >= pgb.rps)
	}
	if d, ok := find(r.closed, nameDup); ok {
		if ng, ok := find(r.closed, nameNginx); ok {
			row("duplicates ≥ 1.0× nginx proxy_pass (keepalive) to the same site", fmt.Sprintf("%.0f vs %.0f req/s: %.2f×", d.rps, ng.rps, d.rps/ng.rps), d.rps >= ng.rps)
		}
	}
	if d, ok := find(r.closed, nameDup); ok && okBare {
		row("duplicates ≥ 2× the bare proxy", fmt.Sprintf("%.0f vs %.0f req/s: %.2f×", d.rps, bare.rps, d.rps/bare.rps), d.rps >= 2*bare.rps)
	}
	if d, ok := find(r.closed, nameDup); ok && okDirect {
		row("duplicates ≥ 0.5× the direct site", fmt.Sprintf("%.0f vs %.0f req/s: %.2f×", d.rps, direct.rps, d.rps/direct.rps), d.rps >= direct.rps/2)
	}
	if p, ok := find(r.closed, namePass); ok && okBare {
		row("pass-through ≥ 1.0× the bare proxy, CPU/req ≤ its", fmt.Sprintf("%.2f×, %s vs %s", p.rps/bare.rps, us(p.selfCPU), us(bare.selfCPU)),
			p.rps >= bare.rps && p.selfCPU <= bare.selfCPU)
	}
	sp, ok1 := find(r.closed, nameServePass)
	sn, ok2 := find(r.closed, nameServeNewPG)
	if ok1 && ok2 && sp.procCPU > 0 && sn.procCPU > 0 {
		ratio := float64(sn.procCPU) / float64(sp.procCPU)
		row("hookonce process CPU per new event (PostgreSQL) ≤ 2.0× its CPU per pass-through request",
			fmt.Sprintf("%s vs %s: %.2f× (hookonce serve, own process)", us(sn.procCPU), us(sp.procCPU), ratio), ratio <= 2.0)
	}
	dir, ok1 := find(r.open, nameDirect)
	hoo, ok2 := find(r.open, nameNewPG)
	pair, ok3 := find(r.open, fmt.Sprintf(namePgbenchRate, r.opts.rate))
	if ok1 && ok2 && ok3 {
		added := hoo.p99 - dir.p99
		row(fmt.Sprintf("open loop %.0f/s, PostgreSQL: the p99 hookonce adds to the site's ≤ the store's own pair's p99 (the same script, pgbench -M prepared -R %.0f) + 2 ms", r.opts.rate, r.opts.rate),
			fmt.Sprintf("+%s (%s − %s) vs %s + 2 ms", ms(added), ms(hoo.p99), ms(dir.p99), ms(pair.p99)), added <= pair.p99+2*time.Millisecond)
	}
	if f := r.flood; f != nil && f.err == nil {
		row(fmt.Sprintf("peak RSS < 256 MiB, %d × 1 MiB webhooks, max_inflight %d", f.senders, f.inflight),
			fmt.Sprintf("%.0f MiB", float64(f.peakRSS)/(1<<20)), f.peakRSS < 256<<20)
	}
	if len(rows) == 0 {
		return ""
	}
	return "Targets, judged on this run:\n\n| Target | Measured | |\n|---|---|---|\n" + strings.Join(rows, "\n") + "\n\n"
}
