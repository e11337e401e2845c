package faults_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
	"github.com/hookonce/hookonce/internal/testkit/servetest"
)

// killConfig: a 1s lease so that a dead process's claim is taken over
// fast; a retry waits for it (in_progress: wait) rather than bouncing.
const killConfig = `
defaults:
  lease: 1s
  wait_timeout: 5s
  store_timeout: 2s
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
`

// killCase is one place where `hookonce serve` dies of kill -9, with the
// counts expected once the sender has retried to a final answer.
type killCase struct {
	name      string
	failpoint string // HOOKONCE_TEST_FAILPOINT of the process that dies
	siteHolds bool   // the site keeps the first call until hookonce dies

	execsAtKill int // site executions when the process dies
	execs       int // site executions in all, once the sender has a 2xx
	takeovers   int // the record's takeovers = the new process's outcome="takeover"
}

// The expected counts, written down before anything runs. The boundary
// (docs/configuration.md, "The at-least-once boundary"): at most 2 executions, and every
// execution past the first is a counted takeover.
var killCases = []killCase{
	// (a) After the claim, before the forward: the site never saw the
	// first delivery; the takeover runs it once.
	{name: "AfterClaim", failpoint: "claimed", execsAtKill: 0, execs: 1, takeovers: 1},
	// (b) While the site holds the request: it ran once under the dead
	// process and runs again under the takeover.
	{name: "AtSite", siteHolds: true, execsAtKill: 1, execs: 2, takeovers: 1},
	// (c) After the site answered, before the answer was stored: same.
	{name: "AfterAnswer", failpoint: "answered", execsAtKill: 1, execs: 2, takeovers: 1},
}

const killBoundary = 2 // executions of one event, at most, across one crash

// kill -9 of a real `hookonce serve` at three points of a delivery, on
// each backend; then a new process and a sender that retries until it gets
// a 2xx. Counted at the site, in the record and in the new process's
// metrics; the SQLite file passes integrity_check after every kill.
func TestKill9(t *testing.T) {
	t.Parallel()
	needBinary(t)
	backends := []struct {
		name string
		dsn  func(t *testing.T, c killCase) string
	}{
		{"SQLite", func(t *testing.T, _ killCase) string { return "sqlite:" + filepath.Join(t.TempDir(), "hookonce.db") }},
		{"Postgres", func(t *testing.T, _ killCase) string { return pgtest.Shared(t).NewDatabase(t) }},
		{"Redis", func(t *testing.T, _ killCase) string { return redistest.Start(t).URL() }},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range killCases {
				t.Run(c.name, func(t *testing.T) { killOnce(t, b.dsn(t, c), c) })
			}
		})
	}
}

func killOnce(t *testing.T, dsn string, c killCase) {
	id := "kill-" + strings.ToLower(c.name)
	body := fmt.Sprintf(`{"id":%q,"amount":100}`, id)
	arrived := make(chan struct{}, 8)
	s := newSite(t, func(_ string, n int, w http.ResponseWriter, r *http.Request) bool {
		select {
		case arrived <- struct{}{}:
		default:
		}
		if c.siteHolds && n == 1 {
			// Still working when hookonce dies; the dead connection ends it.
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return true
		}
		return false
	})
	opts := serveOpts{store: dsn, upstream: s.URL, config: killConfig}
	if c.failpoint != "" {
		opts.env = []string{"HOOKONCE_TEST_FAILPOINT=" + c.failpoint}
	}
	client := newClient(t, 30*time.Second)
	first := startServe(t, opts)
	sent := make(chan reply, 1)
	go func() { sent <- post(client, first.URL+"/hooks/shop", body) }()

	// Kill exactly at the point.
	if c.failpoint != "" {
		first.WaitLogWithin(t, "hookonce: failpoint "+c.failpoint+" reached", 15*time.Second)
	} else {
		select {
		case <-arrived:
		case <-time.After(15 * time.Second):
			t.Fatal("the delivery never reached the site")
		}
	}
	first.Kill9(t)
	var firstReply reply
	select {
	case firstReply = <-sent:
	case <-time.After(10 * time.Second):
		t.Fatal("the sender's first delivery hangs after the kill")
	}
	if firstReply.err == nil {
		t.Errorf("the first delivery got an answer from a killed process: %s", firstReply)
	}
	if n := s.Executions(id); n != c.execsAtKill {
		t.Errorf("executions at the kill = %d, want %d", n, c.execsAtKill)
	}
	store := servetest.OpenStore(t, dsn)
	if rec, err := getRecord(t, store, id); err != nil || rec.State != dedupe.StateProcessing || rec.Takeovers != 0 {
		t.Errorf("record after the kill: state %q takeovers %d err %v; want the dead process's claim, processing", rec.State, rec.Takeovers, err)
	}
	sqlitePath, isSQLite := strings.CutPrefix(dsn, "sqlite:")
	if isSQLite {
		if got := integrityCheck(t, sqlitePath); got != "ok" {
			t.Errorf("integrity_check after kill -9: %s", got)
		}
	}

	// A new process; the sender retries until it gets a 2xx.
	second := startServe(t, serveOpts{store: dsn, upstream: s.URL, config: killConfig})
	began := time.Now()
	final, before := retryUntilOK(client, second.URL+"/hooks/shop", body, 40, 30*time.Second, 200*time.Millisecond)
	took := time.Since(began)
	if !final.ok() || final.replayed {
		t.Fatalf("retry after the restart: %s (before it: %s)", final, histogram(before))
	}
	execs := s.Executions(id)
	rec, err := getRecord(t, store, id)
	if err != nil {
		t.Fatalf("record after the retry: %v", err)
	}
	metrics := second.Metrics(t)
	takeovers := int(counter(metrics, "hookonce_requests_total", "outcome", "takeover"))
	t.Logf("%s: executions %d (want %d), record %s takeovers %d (want %d), metric takeovers %d; first delivery: %s; retry took %v, refused before it: %s",
		c.name, execs, c.execs, rec.State, rec.Takeovers, c.takeovers, takeovers, firstReply, took.Round(time.Millisecond), histogram(before))
	if execs != c.execs || execs > killBoundary {
		t.Errorf("executions = %d, want %d (boundary %d)", execs, c.execs, killBoundary)
	}
	if rec.State != dedupe.StateDone || int(rec.Takeovers) != c.takeovers {
		t.Errorf("record = %s with %d takeovers, want done with %d", rec.State, rec.Takeovers, c.takeovers)
	}
	if takeovers != c.takeovers {
		t.Errorf(`hookonce_requests_total{outcome="takeover"} = %d, want %d`, takeovers, c.takeovers)
	}
	if extra := execs - 1; extra > takeovers {
		t.Errorf("%d executions past the first, %d takeovers counted: a duplicate beyond the boundary", extra, takeovers)
	}
	if again := post(client, second.URL+"/hooks/shop", body); !again.ok() || !again.replayed || s.Executions(id) != execs {
		t.Errorf("a later delivery: %s, executions %d; want a replay", again, s.Executions(id))
	}
	second.Terminate(t)
	if isSQLite {
		if got := integrityCheck(t, sqlitePath); got != "ok" {
			t.Errorf("integrity_check after the restart: %s", got)
		}
	}
}
