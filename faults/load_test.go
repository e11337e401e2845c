package faults_test

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// loadConfig shapes a mixed load: new events from several senders at once,
// each retried until it gets a 2xx, some delivered twice at the same moment,
// each delivered once more after its 2xx (a sender's duplicate).
type loadConfig struct {
	url       string
	prefix    string
	workers   int
	maxEvents int           // per worker: the load is bounded in count…
	pace      time.Duration // …and paced: a pause after each event
	together  int           // every together-th event goes out twice at once
	retryFor  time.Duration // how long a sender keeps retrying one event
	attempts  int           // and how many times, at most
	stop      <-chan struct{}
	progress  *atomic.Int64 // counts deliveries as they happen (optional)
}

// eventLog is what the senders saw for one event.
type eventLog struct {
	id         string
	body       string
	firstSent  time.Time // when its first delivery went out
	ok         bool      // a 2xx reached the sender (every delivery of it)
	lastOK     time.Time // when the last 2xx came
	deliveries int
}

// loadResult is the senders' side of a run.
type loadResult struct {
	events     map[string]*eventLog
	deliveries int
	statuses   map[int]int // every answer, by status; -1: no answer
	elapsed    time.Duration
}

// runLoad starts the load and returns a channel that yields its result
// once every worker is done (after stop closes, or maxEvents each).
func runLoad(t testing.TB, cfg loadConfig) <-chan loadResult {
	client := newClient(t, 30*time.Second)
	out := make(chan loadResult, 1)
	res := loadResult{events: map[string]*eventLog{}, statuses: map[int]int{}}
	var mu sync.Mutex
	deliver := func(id, body string) bool {
		deadline := time.Now().Add(cfg.retryFor)
		for i := 0; i < cfg.attempts; i++ {
			r := post(client, cfg.url, body)
			if cfg.progress != nil {
				cfg.progress.Add(1)
			}
			mu.Lock()
			res.deliveries++
			res.events[id].deliveries++
			if r.err != nil {
				res.statuses[-1]++
			} else {
				res.statuses[r.status]++
			}
			if r.ok() {
				res.events[id].lastOK = time.Now()
			}
			mu.Unlock()
			if r.ok() {
				return true
			}
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(100 * time.Millisecond) // the sender's retry schedule
		}
		return false
	}
	began := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range cfg.maxEvents {
				select {
				case <-cfg.stop:
					return
				default:
				}
				id := fmt.Sprintf("%s-w%d-e%d", cfg.prefix, w, i)
				body := fmt.Sprintf(`{"id":%q,"amount":%d}`, id, 100+i)
				mu.Lock()
				res.events[id] = &eventLog{id: id, body: body, firstSent: time.Now()}
				mu.Unlock()
				copies := 1
				if cfg.together > 0 && i%cfg.together == 0 {
					copies = 2
				}
				oks := make([]bool, copies)
				var both sync.WaitGroup
				for c := range copies {
					both.Add(1)
					go func() { defer both.Done(); oks[c] = deliver(id, body) }()
				}
				both.Wait()
				ok := !strings.Contains(fmt.Sprint(oks), "false")
				ok = deliver(id, body) && ok // the sender's duplicate
				mu.Lock()
				res.events[id].ok = ok
				mu.Unlock()
				time.Sleep(cfg.pace)
			}
		}()
	}
	go func() {
		wg.Wait()
		res.elapsed = time.Since(began)
		out <- res
	}()
	return out
}

// lateDuplicates delivers every event of a finished load once more, as a
// sender's late retry would, each until a 2xx (bounded), and returns how
// many of them the site ran again and how many records were missing
// before (a database that forgot them).
func lateDuplicates(t testing.TB, store dedupe.Store, s *proxytest.Site, url string, res loadResult) (reran, missing int) {
	t.Helper()
	client := newClient(t, 30*time.Second)
	ids := make([]string, 0, len(res.events))
	for id := range res.events {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		_, err := getRecord(t, store, id)
		switch {
		case errors.Is(err, dedupe.ErrNotFound):
			missing++
		case err != nil:
			t.Fatalf("get %s: %v", id, err)
		}
	}
	before := s.Total()
	for _, id := range ids {
		e := res.events[id]
		if r, seen := retryUntilOK(client, url, e.body, 20, 10*time.Second, 100*time.Millisecond); !r.ok() {
			t.Errorf("late duplicate of %s: %s (before: %s)", id, r, histogram(seen))
		}
	}
	return s.Total() - before, missing
}

// runExpect is what a fault run must end with, written down before it
// runs.
type runExpect struct {
	lost       int // events without a 2xx although their sender retried
	processing int // records left processing once the leases have ended
	// extraAllowed is the number of executions past the first one event
	// may have: the record's takeovers (the documented boundary), plus
	// whatever the run's own boundary adds (a Redis without persistence
	// forgets the records of its past).
	extraAllowed func(e *eventLog, rec dedupe.Record, found bool, calls []time.Time) int
	// feltAtLeast: answers other than 2xx the senders must have seen, or
	// the fault did not touch the load and the run proves nothing.
	feltAtLeast int
}

func takeoversOnly(_ *eventLog, rec dedupe.Record, found bool, _ []time.Time) int {
	if !found {
		return 0
	}
	return int(rec.Takeovers)
}

// runReport is the counted outcome of a fault run.
type runReport struct {
	events, deliveries, executions int
	extra                          int // executions past the first, summed over events
	beyond                         int // extra executions the boundary does not explain
	lost                           int
	processing                     int
	recordTakeovers                int
	notOK                          int // answers other than 2xx the senders saw
	statuses                       string
}

func (r runReport) String() string {
	return fmt.Sprintf("events %d, deliveries %d, executions %d, extra executions %d (beyond the boundary %d), takeovers in records %d, lost %d, processing left %d; answers: %s",
		r.events, r.deliveries, r.executions, r.extra, r.beyond, r.recordTakeovers, r.lost, r.processing, r.statuses)
}

// checkRun counts a finished run at the site and in the store, after the
// leases have ended, and fails the test where it differs from exp.
func checkRun(t testing.TB, store dedupe.Store, s *proxytest.Site, res loadResult, lease time.Duration, exp runExpect) runReport {
	t.Helper()
	time.Sleep(lease + 200*time.Millisecond) // every lease a dead claim held has ended
	rep := runReport{events: len(res.events), deliveries: res.deliveries, statuses: histogram(res.statuses)}
	for status, n := range res.statuses {
		if status < 200 || status > 299 {
			rep.notOK += n
		}
	}
	ids := make([]string, 0, len(res.events))
	for id := range res.events {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var problems []string
	for _, id := range ids {
		e := res.events[id]
		calls := s.Times(id)
		rep.executions += len(calls)
		rec, err := getRecord(t, store, id)
		found := err == nil
		if err != nil && !errors.Is(err, dedupe.ErrNotFound) {
			t.Fatalf("get %s: %v", id, err)
		}
		if found {
			rep.recordTakeovers += int(rec.Takeovers)
		}
		if !e.ok || len(calls) == 0 {
			rep.lost++
			problems = append(problems, fmt.Sprintf("%s: lost (sender ok=%v, executions %d, %d deliveries)", id, e.ok, len(calls), e.deliveries))
			continue
		}
		extra := len(calls) - 1
		rep.extra += extra
		if allowed := exp.extraAllowed(e, rec, found, calls); extra > allowed {
			rep.beyond += extra - allowed
			problems = append(problems, fmt.Sprintf("%s: %d executions, %d allowed (record found=%v state %s takeovers %d)",
				id, len(calls), allowed+1, found, rec.State, rec.Takeovers))
		}
	}
	left := processing(t, store)
	rep.processing = len(left)
	for _, r := range left {
		problems = append(problems, fmt.Sprintf("%s: left processing (lease until %s, takeovers %d)", r.Key, r.LeaseUntil.Format(time.RFC3339Nano), r.Takeovers))
	}
	if rep.lost != exp.lost || rep.processing != exp.processing || rep.beyond != 0 || rep.notOK < exp.feltAtLeast {
		if len(problems) > 20 {
			problems = append(problems[:20], fmt.Sprintf("… and %d more", len(problems)-20))
		}
		t.Errorf("run differs from what was expected (lost %d, processing %d, no execution beyond the boundary, at least %d refusals felt):\n%s\n%s",
			exp.lost, exp.processing, exp.feltAtLeast, rep, strings.Join(problems, "\n"))
	}
	return rep
}

// answerOK is the site's handler in load runs: a few milliseconds of work,
// so that faults catch deliveries at the site.
func answerOK(work time.Duration) func(string, int, http.ResponseWriter, *http.Request) bool {
	return func(id string, n int, w http.ResponseWriter, r *http.Request) bool {
		time.Sleep(work)
		return false
	}
}
