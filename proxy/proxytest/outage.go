package proxytest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// Outage is one way a backend goes away and comes back.
type Outage struct {
	Name     string
	Down, Up func(testing.TB)
	// Within bounds how long the 503 may take (the config's store_timeout
	// plus scheduling slack): a store call must end, never hang on a dead
	// server. Not a speed check.
	Within time.Duration
	// RetryWhile says which answers the sender keeps retrying after Up
	// (until 20s have passed); nil retries 503 only, and the first other
	// answer must be the 200.
	RetryWhile func(status int) bool
}

// RunOutageThroughProxy starts a proxy on store in front of a counting
// site, with one sender ("shop" at /hooks/shop, key in the body's "id") and
// defaults, the YAML lines of the config's defaults block (one setting a
// line, e.g. "store_timeout: 500ms"); then, for each outage in turn, as a subtest: with the backend down
// a new event is refused with 503 + Retry-After within o.Within and the
// site sees nothing; once the backend is back, the sender's retry is
// processed once (200, not replayed) by the same proxy and Store, and a
// repeat is replayed.
func RunOutageThroughProxy(t *testing.T, store dedupe.Store, defaults string, outages ...Outage) {
	config := "defaults:\n"
	for _, line := range strings.Split(strings.TrimSpace(defaults), "\n") {
		config += "  " + strings.TrimSpace(line) + "\n"
	}
	config += `senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
`
	site := NewSite(t, nil)
	px := Start(t, store, site.URL, config)
	url := px.URL + "/hooks/shop"
	for _, o := range outages {
		t.Run(o.Name, func(t *testing.T) {
			id := "during-outage-" + o.Name
			body := fmt.Sprintf(`{"id":%q}`, id)
			before := site.Total()
			o.Down(t)
			began := time.Now()
			got := Post(t, url, body)
			if got.Status != http.StatusServiceUnavailable || got.Header.Get("Retry-After") == "" {
				o.Up(t)
				t.Fatalf("backend %s: %d Retry-After=%q %s", o.Name, got.Status, got.Header.Get("Retry-After"), got.Body)
			}
			if took := time.Since(began); took > o.Within {
				t.Errorf("503 took %v, want at most %v", took, o.Within)
			}
			if n := site.Total() - before; n != 0 {
				t.Errorf("site ran %d times while the backend was %s", n, o.Name)
			}
			o.Up(t)

			retry := o.RetryWhile
			if retry == nil {
				retry = func(status int) bool { return status == http.StatusServiceUnavailable }
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				got = Post(t, url, body)
				if !retry(got.Status) || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond) // the sender's retry schedule
			}
			if got.Status != http.StatusOK || got.Replayed() {
				t.Fatalf("retry after the outage: %d replayed=%v %s", got.Status, got.Replayed(), got.Body)
			}
			if again := Post(t, url, body); !again.Replayed() {
				t.Fatalf("repeat after the outage not replayed: %d %s", again.Status, again.Body)
			}
			if n := site.Executions(id); n != 1 {
				t.Fatalf("executions = %d, want 1", n)
			}
		})
	}
}
