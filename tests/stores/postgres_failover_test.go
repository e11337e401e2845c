package stores

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

const failoverConfig = `
defaults:
  store_timeout: 500ms
  lease: 2s
  in_progress: reject
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
`

// failoverRunsEnv repeats TestSynchronousFailover's scenario (each run on
// a fresh primary and standby): HOOKONCE_FAILOVER_RUNS=10.
const failoverRunsEnv = "HOOKONCE_FAILOVER_RUNS"

// A primary with a synchronous standby behind the replicas' own failover
// DSN (two hosts, target_session_attrs=read-write). Events are claimed,
// then the replication link stalls while the site works, so the
// completions' commits wait for the standby past store_timeout and are
// cancelled: PostgreSQL keeps them on the primary only. The primary is
// killed (-9), the stalled WAL lost with it, the standby promoted, and
// every event is delivered again.
//
// An event whose answer hookonce reported as stored must never run again;
// one it logged as not stored (stored: false) may: that is the documented
// window. Both replicas serve again within seconds without a restart, and
// the operator's read-only open works on the same DSN. (#36)
func TestSynchronousFailover(t *testing.T) {
	runs := 1
	if v := os.Getenv(failoverRunsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q", failoverRunsEnv, v)
		}
		runs = n
	}
	var total failoverResult
	for i := range runs {
		t.Run(fmt.Sprint("run", i+1), func(t *testing.T) {
			r := runSynchronousFailover(t)
			total.stalled += r.stalled
			total.reportedStored += r.reportedStored
			total.rerun += r.rerun
			total.rerunReportedStored += r.rerunReportedStored
		})
	}
	t.Logf("%d run(s): %d deliveries with the link stalled, %d reported stored, %d ran again (%d of them reported stored)",
		runs, total.stalled, total.reportedStored, total.rerun, total.rerunReportedStored)
}

type failoverResult struct {
	stalled, reportedStored, rerun, rerunReportedStored int
}

func runSynchronousFailover(t *testing.T) failoverResult {
	primary := pgtest.Start(t)
	dsn := primary.NewDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	mustNew(t, dsn).Close() // migrated before the standby copies it
	standby, link := pgtest.StartStandby(t, primary)
	if err := primary.SetSynchronousStandbys("*", 1); err != nil {
		t.Fatal(err)
	}
	multi := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		primary.Port(), standby.Port(), db)

	// The site counts every run; the "stall-" events wait for the test to
	// stall the link before they answer.
	gate := make(chan struct{})
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("X-Test-Event"), "stall-") {
			<-gate
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	var pxs []*proxytest.Instance
	for range 2 {
		pxs = append(pxs, proxytest.Start(t, mustNew(t, multi), site.URL, failoverConfig))
	}
	post := func(px *proxytest.Instance, id string) proxytest.Reply {
		return proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"`+id+`"}`, "X-Test-Event", id)
	}

	// until posts id until the site has it (a claim may time out on a
	// busy machine: 503, the site not called) and answers the last reply.
	until := func(px *proxytest.Instance, id string) proxytest.Reply {
		for range 20 {
			got := post(px, id)
			if got.Status != http.StatusServiceUnavailable || site.Executions(id) > 0 {
				return got
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("%s never reached the site", id)
		return proxytest.Reply{}
	}

	const acked, stalled = 4, 4
	var ids []string
	for i := range acked {
		id := fmt.Sprint("acked-", i)
		ids = append(ids, id)
		if got := until(pxs[i%2], id); got.Status != http.StatusOK {
			t.Fatalf("%s before the failover: %d %s", id, got.Status, got.Body)
		}
	}
	var wg sync.WaitGroup
	for i := range stalled {
		id := fmt.Sprint("stall-", i)
		ids = append(ids, id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			until(pxs[i%2], id)
		}()
	}
	// Every stalled event is claimed (its claim replicated) and at the site.
	deadline := time.Now().Add(15 * time.Second)
	for site.Total() < acked+stalled {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d deliveries reached the site", site.Total(), acked+stalled)
		}
		time.Sleep(10 * time.Millisecond)
	}
	link.Stall()
	close(gate)
	wg.Wait() // the completions gave up (or say they are stored)

	// A new event while the link is stalled: its claim's commit is not
	// confirmed, so the site is not called (503 + Retry-After).
	ids = append(ids, "new-while-stalled")
	if got := post(pxs[0], "new-while-stalled"); got.Status != http.StatusServiceUnavailable || got.Header.Get("Retry-After") == "" {
		t.Fatalf("new event with the link stalled: %d Retry-After=%q %s", got.Status, got.Header.Get("Retry-After"), got.Body)
	}
	if n := site.Executions("new-while-stalled"); n != 0 {
		t.Fatalf("new event with the link stalled ran %d times at the site, want 0", n)
	}

	// What each replica reported about each stalled event's answer.
	notStored := map[string]bool{}
	for _, px := range pxs {
		for _, line := range strings.Split(px.Logs.String(), "\n") {
			var e struct {
				Key    string `json:"key"`
				Stored *bool  `json:"stored"`
			}
			if json.Unmarshal([]byte(line), &e) == nil && e.Stored != nil && !*e.Stored {
				notStored[e.Key] = true
			}
		}
	}

	promoted := failOver(t, primary, standby, link, pxs, "after-")

	// Every event is delivered again until the sender gets a 2xx.
	for i, id := range ids {
		for {
			got := post(pxs[i%2], id)
			if got.Status/100 == 2 {
				break
			}
			if time.Since(promoted) > 30*time.Second {
				t.Fatalf("%s still answered %d %s 30s after the promotion", id, got.Status, got.Body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	var r failoverResult
	for _, id := range ids {
		runs := site.Executions(id)
		stalledEvent := strings.HasPrefix(id, "stall-")
		if stalledEvent {
			r.stalled++
			if !notStored[id] {
				r.reportedStored++
			}
			if runs > 1 {
				r.rerun++
			}
		}
		switch {
		case runs == 1:
		case runs == 2 && stalledEvent && notStored[id]:
			// Logged as not stored: the documented window.
		default:
			if stalledEvent && !notStored[id] {
				r.rerunReportedStored++
			}
			t.Errorf("%s ran %d times; hookonce logged its answer as %s", id, runs,
				map[bool]string{true: "not stored", false: "stored"}[notStored[id]])
		}
	}
	if t.Failed() {
		for i, px := range pxs {
			t.Logf("replica %d log:\n%s", i, px.Logs.String())
		}
	}
	t.Logf("stalled: %d, reported stored: %d, ran again: %d (reported stored: %d)",
		r.stalled, r.reportedStored, r.rerun, r.rerunReportedStored)

	// The operator's read-only open on the replicas' own DSN.
	ro, err := postgres.OpenReadOnly(ctxFor(t, 15*time.Second), multi)
	if err != nil {
		t.Fatalf("OpenReadOnly on the failover DSN after the promotion: %v", err)
	}
	defer ro.Close()
	rec, err := ro.Get(ctxFor(t, 5*time.Second), "shop", "acked-0")
	if err != nil || rec.State != dedupe.StateDone {
		t.Fatalf("lookup of acked-0 after the promotion: %v %v", rec.State, err)
	}
	return r
}

// failOver kills the primary (-9), cuts its link to the standby and
// promotes the standby; then every replica must serve a new event (ids
// prefix0, prefix1, …) within 15 s, without a restart. It returns when
// the standby was promoted.
func failOver(t *testing.T, primary, standby *pgtest.Server, link *pgtest.Link, pxs []*proxytest.Instance, prefix string) time.Time {
	t.Helper()
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	link.Cut()
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	for i, px := range pxs {
		id := fmt.Sprint(prefix, i)
		for {
			got := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"`+id+`"}`, "X-Test-Event", id)
			if got.Status == http.StatusOK {
				break
			}
			if time.Since(promoted) > 15*time.Second {
				t.Fatalf("replica %d still answers %d %s 15s after the promotion", i, got.Status, got.Body)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("replica %d serves again %v after the promotion", i, time.Since(promoted).Round(10*time.Millisecond))
	}
	return promoted
}
