package faults_test

// Serialize across two real `hookonce serve` replicas on one store, and the
// replica holding an order killed with kill -9 while its delivery is at the
// site. Expected, written down before the run: the other replica's
// delivery about the same order waits, runs once after the dead holder's
// lease (1 s) ends, and is answered 200; it never runs while the first is
// at the site.

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

const serializeConfig = `
defaults:
  lease: 1s
  store_timeout: 2s
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
    serialize: { key: [ { body: order } ], wait: 10s }
`

func TestSerializeHolderKilled(t *testing.T) {
	needBinary(t)
	arrived := make(chan string, 4)
	release := make(chan struct{})
	defer close(release)
	s := newSite(t, func(id string, n int, w http.ResponseWriter, r *http.Request) bool {
		arrived <- id
		if id == "first" {
			select { // held at the site until its replica dies
			case <-r.Context().Done():
			case <-release:
			}
			return true
		}
		return false
	})
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "hookonce.db")
	a := startServe(t, serveOpts{store: dsn, upstream: s.URL, config: serializeConfig})
	b := startServe(t, serveOpts{store: dsn, upstream: s.URL, config: serializeConfig})
	client := newClient(t, 30*time.Second)
	go post(client, a.URL+"/hooks/shop", `{"id":"first","order":"o1"}`)
	if id := <-arrived; id != "first" {
		t.Fatalf("the site got %q first", id)
	}
	second := make(chan reply, 1)
	began := time.Now()
	go func() { second <- post(client, b.URL+"/hooks/shop", `{"id":"second","order":"o1"}`) }()
	select {
	case id := <-arrived:
		t.Fatalf("%q ran at the site while the order's first delivery was there", id)
	case <-time.After(500 * time.Millisecond):
	}
	a.Kill9(t)
	killed := time.Now()
	r := <-second
	t.Logf("second delivery: %s after %v (%v after the kill)", r, time.Since(began).Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	if !r.ok() || s.Executions("second") != 1 {
		t.Fatalf("second: %s, executions %d; want it run once after the dead holder's lease", r, s.Executions("second"))
	}
	if waited := time.Since(killed); waited > 5*time.Second {
		t.Errorf("the order stayed busy %v after its holder died (lease 1s)", waited)
	}
}
