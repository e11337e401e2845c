package faults_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"

	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	_ "modernc.org/sqlite" // PRAGMA integrity_check on the store's file

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/dedupe/redis"
	"github.com/hookonce/hookonce/dedupe/sqlite"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// ---- the site: counts every call per event id ----

// site is the upstream: an httptest server that records every call of its
// handler per event id (the JSON body's "id"), with the time of each call.
type site struct {
	*httptest.Server
	hook func(id string, n int, w http.ResponseWriter, r *http.Request) bool

	mu    sync.Mutex // guards calls and total
	calls map[string][]time.Time
	total int
}

// newSite starts a counting site. hook, when set, runs after the call is
// counted (n is the call's number for its id, from 1) and returns true
// when it wrote the answer itself; otherwise the site answers
// 200 {"ok":true,"id":…,"n":…}.
func newSite(t testing.TB, hook func(id string, n int, w http.ResponseWriter, r *http.Request) bool) *site {
	t.Helper()
	s := &site{hook: hook, calls: map[string][]time.Time{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id := proxytest.EventID(r, body)
	s.mu.Lock()
	s.calls[id] = append(s.calls[id], time.Now())
	s.total++
	n := len(s.calls[id])
	s.mu.Unlock()
	if s.hook != nil && s.hook(id, n, w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"ok":true,"id":%q,"n":%d}`, id, n)
}

// execs is how many times the handler ran for id.
func (s *site) execs(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls[id])
}

// callTimes returns when the handler ran for id.
func (s *site) callTimes(id string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.calls[id]...)
}

// totalCalls is every call the handler got.
func (s *site) totalCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// ---- the sender ----

// reply is one answer as the sender saw it (err set when none came).
type reply struct {
	status   int
	replayed bool
	body     string
	err      error
}

func (r reply) ok() bool { return r.err == nil && r.status >= 200 && r.status <= 299 }

func (r reply) String() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	return fmt.Sprintf("%d replayed=%v %s", r.status, r.replayed, strings.TrimSpace(r.body))
}

// newClient is a sender's HTTP client; its idle connections are closed
// when the test ends.
func newClient(t testing.TB, timeout time.Duration) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: timeout}
}

func post(c *http.Client, url, body string) reply {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return reply{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true", body: string(b), err: err}
}

// retryUntilOK delivers body like a sender that retries every answer but
// a 2xx (and every failed connection), bounded in attempts and time.
// It returns the last reply and the replies before it, by status (-1 for
// no answer).
func retryUntilOK(c *http.Client, url, body string, attempts int, within, pause time.Duration) (reply, map[int]int) {
	seen := map[int]int{}
	deadline := time.Now().Add(within)
	var r reply
	for i := 0; i < attempts; i++ {
		r = post(c, url, body)
		if r.ok() || time.Now().After(deadline) {
			return r, seen
		}
		if r.err != nil {
			seen[-1]++
		} else {
			seen[r.status]++
		}
		time.Sleep(pause)
	}
	return r, seen
}

// ---- `hookonce serve` as a process ----

type serveOpts struct {
	store    string   // --store
	upstream string   // --upstream
	config   string   // YAML, written to a file
	env      []string // added to the environment (HOOKONCE_TEST_FAILPOINT=…)
	// wrap runs the binary through another command (unshare …); it must
	// exec the binary with the arguments appended, keeping the PID.
	wrap []string
	cred *syscall.Credential // run as another user
	dir  string              // where the config file goes (default: a temp dir)
}

// proc is a running `hookonce serve`.
type proc struct {
	cmd   *exec.Cmd
	URL   string // http://listen
	Admin string // http://admin-listen

	mu    sync.Mutex // guards lines
	lines []string   // stderr, one entry a line
	done  chan struct{}
	err   error // Wait's, once done is closed
}

func (o serveOpts) command(t testing.TB, extra ...string) *exec.Cmd {
	t.Helper()
	dir := o.dir
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := filepath.Join(dir, "hookonce.yaml")
	if err := os.WriteFile(cfg, []byte(o.config), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--log-format", "json",
		"--store", o.store, "--upstream", o.upstream, "--config", cfg, "--drain-timeout", "2s"}
	args = append(args, extra...)
	name := binary
	if len(o.wrap) > 0 {
		name, args = o.wrap[0], append(append(append([]string(nil), o.wrap[1:]...), binary), args...)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp"}, o.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: o.cred}
	return cmd
}

// launch starts the process and collects its stderr; it does not wait.
func launch(t testing.TB, o serveOpts) *proc {
	t.Helper()
	p := &proc{cmd: o.command(t), done: make(chan struct{})}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill9(t) })
	return p
}

// startServe launches `hookonce serve` and waits until it listens.
func startServe(t testing.TB, o serveOpts) *proc {
	t.Helper()
	p := launch(t, o)
	admin := p.waitLog(t, "admin listener serving", 20*time.Second)
	serving := p.waitLog(t, "hookonce serving", 20*time.Second)
	p.Admin = "http://" + fmt.Sprint(admin["listen"])
	p.URL = "http://" + fmt.Sprint(serving["listen"])
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// find returns the first stderr line for which match holds.
func (p *proc) find(match func(line string, l map[string]any) bool) (map[string]any, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, line := range p.lines {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil {
			l = map[string]any{"msg": line}
		}
		if match(line, l) {
			return l, true
		}
	}
	return nil, false
}

// countLog counts the JSON log lines whose msg is msg.
func (p *proc) countLog(msg string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, line := range p.lines {
		var l struct{ Msg string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == msg {
			n++
		}
	}
	return n
}

func (p *proc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitLog waits for a log line whose msg is msg (a JSON line's msg, or a
// plain line as a whole), failing the test if the process exits first.
func (p *proc) waitLog(t testing.TB, msg string, within time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		l, ok := p.find(func(_ string, l map[string]any) bool { return l["msg"] == msg })
		if ok {
			return l
		}
		if p.exited() {
			// The last lines may still be in the pipe: look once more.
			if l, ok := p.find(func(_ string, l map[string]any) bool { return l["msg"] == msg }); ok {
				return l
			}
			t.Fatalf("hookonce serve exited (%v) before logging %q:\n%s", p.err, msg, p.stderr())
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line %q within %v:\n%s", msg, within, p.stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill9 kills the process with SIGKILL and waits for it; a no-op once it
// has exited.
func (p *proc) kill9(t testing.TB) {
	t.Helper()
	if p.exited() {
		return
	}
	_ = syscall.Kill(p.pid(), syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Errorf("pid %d did not die of SIGKILL within 10s", p.pid())
	}
}

// terminate stops the process with SIGTERM and fails the test unless it
// exits 0 within 15s.
func (p *proc) terminate(t testing.TB) {
	t.Helper()
	_ = syscall.Kill(p.pid(), syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("hookonce serve exited with %v after SIGTERM:\n%s", p.err, p.stderr())
		}
	case <-time.After(15 * time.Second):
		t.Errorf("hookonce serve did not stop on SIGTERM within 15s")
	}
}

// metrics scrapes the admin listener's /metrics.
func (p *proc) metrics(t testing.TB) string {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(p.Admin + "/metrics")
	if err != nil {
		t.Fatalf("scrape metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape metrics: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// counter sums, in Prometheus text, the samples of name that carry every
// label pair given as "k", "v", ….
func counter(text, name string, labels ...string) float64 {
	total := 0.0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		metric, value, ok := strings.Cut(line, " ")
		if !ok || (metric != name && !strings.HasPrefix(metric, name+"{")) {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains(metric, labels[i]+`="`+labels[i+1]+`"`) {
				match = false
			}
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); match && err == nil {
			total += v
		}
	}
	return total
}

// gathered sums, in an in-process registry, the samples of name that carry
// every label pair given.
func gathered(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	return proxytest.Metric(t, g, name, labels...)
}

// ---- stores ----

// openStore opens a store on dsn in the test process, to look at records.
func openStore(t testing.TB, dsn string) dedupe.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var s dedupe.Store
	var err error
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		s, err = sqlite.Open(ctx, strings.TrimPrefix(dsn, "sqlite:"))
	case strings.HasPrefix(dsn, "postgres://"):
		s, err = postgres.Open(ctx, dsn)
	case strings.HasPrefix(dsn, "redis://"):
		s, err = redis.Open(ctx, dsn)
	default:
		t.Fatalf("openStore: unknown DSN %q", dsn)
	}
	if err != nil {
		t.Fatalf("open store %s: %v", dsn, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func getRecord(t testing.TB, s dedupe.Store, key string) (dedupe.Record, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Get(ctx, "shop", key)
}

// processing lists the records still processing.
func processing(t testing.TB, s dedupe.Store) []dedupe.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs, err := s.List(ctx, dedupe.ListFilter{State: dedupe.StateProcessing, Limit: 10000})
	if err != nil {
		t.Fatalf("list processing records: %v", err)
	}
	return recs
}

// integrityCheck runs PRAGMA integrity_check on an SQLite file and returns
// its rows joined ("ok" for a sound file).
func integrityCheck(t testing.TB, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return "error: " + err.Error()
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return "error: " + err.Error()
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		out = append(out, "error: "+err.Error())
	}
	return strings.Join(out, "; ")
}

// ---- reporting ----

// histogram renders a status → count map in order.
func histogram(m map[int]int) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var b bytes.Buffer
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" ")
		}
		if k == -1 {
			fmt.Fprintf(&b, "no-answer×%d", m[k])
		} else {
			fmt.Fprintf(&b, "%d×%d", k, m[k])
		}
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}
