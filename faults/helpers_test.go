package faults_test

import (
	"bytes"
	"context"
	"database/sql"

	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	_ "modernc.org/sqlite" // PRAGMA integrity_check on the store's file

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/servetest"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// ---- the site: counts every call per event id ----

// newSite starts the counting site (proxytest.Site). hook, when set,
// runs after the call is counted (n is the call's number for its id, from
// 1) and returns true when it wrote the answer itself; otherwise the site
// answers 200 {"ok":true,"id":…,"n":…}.
func newSite(t testing.TB, hook func(id string, n int, w http.ResponseWriter, r *http.Request) bool) *proxytest.Site {
	t.Helper()
	return proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id, n := proxytest.EventID(r, body), proxytest.CallNumber(r)
		if hook != nil && hook(id, n, w, r) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"ok":true,"id":%q,"n":%d}`, id, n)
	})
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

// ---- `hookonce serve` as a process (servetest) ----

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

// options is o as servetest runs it: the config in a file, a bare
// environment, and a 2s drain.
func (o serveOpts) options(t testing.TB) servetest.Options {
	t.Helper()
	dir := o.dir
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := filepath.Join(dir, "hookonce.yaml")
	if err := os.WriteFile(cfg, []byte(o.config), 0o644); err != nil {
		t.Fatal(err)
	}
	return servetest.Options{
		Bin:  binary,
		Args: []string{"--store", o.store, "--upstream", o.upstream, "--config", cfg, "--drain-timeout", "2s"},
		Env:  append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp"}, o.env...),
		Wrap: o.wrap,
		Cred: o.cred,
	}
}

// launch starts `hookonce serve` and collects its stderr; it does not wait.
func launch(t testing.TB, o serveOpts) *servetest.Server {
	t.Helper()
	return servetest.Launch(t, o.options(t))
}

// startServe launches `hookonce serve` and waits until it listens.
func startServe(t testing.TB, o serveOpts) *servetest.Server {
	t.Helper()
	return servetest.Start(t, o.options(t))
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
