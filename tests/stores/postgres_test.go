package stores

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/hookonce/hookonce/internal/testkit/servetest"
	"github.com/hookonce/hookonce/internal/testkit/testenv"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

func TestPostgresAcceptance(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	proxytest.RunAcceptance(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) })
}

// Two hookonce replicas (separate handlers, separate pools) in front of one
// site and one database: 10 events × 6 deliveries at once, spread over
// both, run the site's handler exactly 10 times, every delivery gets a 2xx
// (proxytest.RunTwoReplicas).
func TestPostgresTwoReplicas(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	proxytest.RunTwoReplicas(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) })
}

// Serialize across two replicas on one database: 20 orders × 3 different
// events at once, a naive check-then-insert handler, every order shipped
// once (proxytest.RunSerializeReplicas).
func TestPostgresSerializeTwoReplicas(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	proxytest.RunSerializeReplicas(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) })
}

const outageConfig = `
defaults:
  store_timeout: 500ms
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
`

// The database is down: a new event is refused with 503 + Retry-After and
// the site sees nothing; once it is back, the sender's retry is processed
// once, by the same proxy and store.
func TestPostgresOutageThroughProxy(t *testing.T) {
	srv := pgtest.Start(t)
	must := func(op func() error) func(testing.TB) {
		return func(t testing.TB) {
			t.Helper()
			if err := op(); err != nil {
				t.Fatal(err)
			}
		}
	}
	proxytest.RunOutageThroughProxy(t, mustNew(t, srv.NewDatabase(t)), "store_timeout: 500ms",
		proxytest.Outage{Name: "stopped", Down: must(srv.Stop), Up: must(srv.Start), Within: 500*time.Millisecond + slack})
}

// A frozen database (SIGSTOP on the server and its backends) answers a new
// event with 503 + Retry-After within store_timeout, and the site sees
// nothing. (The store-level test checks that no goroutine is left behind.)
func TestPostgresPausedDatabaseThroughProxy(t *testing.T) {
	srv := pgtest.Start(t)
	store, err := postgres.Open(ctxFor(t, 30*time.Second), srv.NewDatabase(t)+"&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, outageConfig)
	url := px.URL + "/hooks/shop"
	if got := proxytest.Post(t, url, `{"id":"before-pause"}`); got.Status != http.StatusOK {
		t.Fatalf("before the pause: %d %s", got.Status, got.Body)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	for _, body := range []string{`{"id":"while-paused"}`, `{"id":"before-pause"}`} {
		began := time.Now()
		got := proxytest.Post(t, url, body)
		if got.Status != http.StatusServiceUnavailable || got.Header.Get("Retry-After") == "" {
			t.Fatalf("%s with the database paused: %d Retry-After=%q %s", body, got.Status, got.Header.Get("Retry-After"), got.Body)
		}
		if took := time.Since(began); took > 500*time.Millisecond+slack {
			t.Fatalf("503 took %v with store_timeout 500ms", took)
		}
	}
	if n := site.Total(); n != 1 {
		t.Fatalf("site called %d times, want 1 (before the pause only)", n)
	}
}

// crashChildEnv makes the test binary, re-executed, serve as a hookonce
// process of its own (see init below) so that the test can
// kill -9 it.
const crashChildEnv = "HOOKONCE_PGTEST_CHILD"

const crashConfig = `
defaults:
  lease: 1s
  in_progress: reject
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
`

func init() {
	if os.Getenv(crashChildEnv) == "" {
		return
	}
	// Child mode: serve a proxy on the Postgres store until killed.
	err := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		store, err := postgres.Open(ctx, os.Getenv("HOOKONCE_PGTEST_DSN"))
		if err != nil {
			return err
		}
		c, err := contract.Parse([]byte(crashConfig), "crash.yaml")
		if err != nil {
			return err
		}
		up, err := url.Parse(os.Getenv("HOOKONCE_PGTEST_UPSTREAM"))
		if err != nil {
			return err
		}
		p, err := proxy.New(proxy.Options{Upstream: up, Contract: c, Store: store})
		if err != nil {
			return err
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		fmt.Printf("LISTEN %s\n", l.Addr())
		return http.Serve(l, p)
	}()
	fmt.Fprintln(os.Stderr, "child:", err)
	os.Exit(1)
}

// startChild runs a hookonce process on dsn in front of upstream and
// returns how to kill it and its address.
func startChild(t *testing.T, dsn, upstream string) (kill9 func(), url string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1", "HOOKONCE_PGTEST_DSN="+dsn, "HOOKONCE_PGTEST_UPSTREAM="+upstream)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "LISTEN ")
	if err != nil || !ok {
		t.Fatalf("child did not start: %q %v", line, err)
	}
	return func() { cmd.Process.Kill(); cmd.Wait() }, "http://" + addr
}

// startBinary builds the hookonce binary and runs `hookonce serve` on dsn in
// front of upstream with crashConfig.
func startBinary(t *testing.T, dsn, upstream string) (kill9 func(), url string) {
	t.Helper()
	dir := t.TempDir()
	bin, err := servetest.Build(dir, nil)
	if err != nil {
		// Outside CI, package main may be mid-edit while this package is
		// tested on its own; test.sh builds it first, and CI must not skip.
		testenv.Missing(t, err.Error(), "package main may be mid-edit; test.sh builds it first")
	}
	cfg := filepath.Join(dir, "hookonce.yaml")
	if err := os.WriteFile(cfg, []byte(crashConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	s := servetest.Start(t, servetest.Options{Bin: bin, Env: []string{"PATH=/usr/bin:/bin"},
		Args: []string{"--upstream", upstream, "--store", dsn, "--config", cfg}})
	return func() { s.Kill9(t) }, s.URL
}

// A hookonce process dies (kill -9) while its request sits at a slow site.
// Its claim stays processing (retries are refused) until the lease ends;
// then a retry at another instance takes it over and completes. The site
// ran twice: the documented at-least-once boundary, counted as one takeover.
func TestPostgresCrashedProcessClaimIsTakenOver(t *testing.T) {
	starters := []struct {
		name  string
		start func(t *testing.T, dsn, upstream string) (kill9 func(), url string)
	}{
		{"TestBinaryAsProxy", startChild},
		{"HookonceServe", startBinary},
	}
	for _, st := range starters {
		t.Run(st.name, func(t *testing.T) { crashTakeover(t, st.start) })
	}
}

func crashTakeover(t *testing.T, startProcess func(t *testing.T, dsn, upstream string) (kill9 func(), url string)) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	arrived := make(chan struct{}, 1)
	unblock := make(chan struct{})
	defer close(unblock)
	var calls sync.Mutex
	first := true
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Lock()
		wasFirst := first
		first = false
		calls.Unlock()
		if wasFirst {
			arrived <- struct{}{}
			select { // the site is still working when hookonce dies
			case <-unblock:
			case <-time.After(20 * time.Second):
			}
		}
		io.WriteString(w, `{"ok":true}`)
	})
	kill9, childURL := startProcess(t, dsn, site.URL)
	body := `{"id":"crash-1"}`
	go func() {
		// Its answer never comes: the process dies under it.
		resp, err := http.Post(childURL+"/hooks/shop", "application/json", strings.NewReader(body))
		if err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the request never reached the site")
	}

	store := mustNew(t, dsn)
	held, err := store.Get(ctxFor(t, 5*time.Second), "shop", "crash-1")
	if err != nil || held.State != dedupe.StateProcessing {
		t.Fatalf("claim while at the site: %+v, %v", held, err)
	}
	kill9()

	second := proxytest.Start(t, store, site.URL, crashConfig)
	url := second.URL + "/hooks/shop"
	refused := 0
	deadline := time.Now().Add(15 * time.Second)
	var got proxytest.Reply
	for {
		got = proxytest.Post(t, url, body)
		if got.Status != http.StatusConflict || time.Now().After(deadline) {
			break
		}
		refused++ // the dead process's lease is still alive
		time.Sleep(100 * time.Millisecond)
	}
	if got.Status != http.StatusOK || got.Replayed() {
		t.Fatalf("retry after the lease: %d replayed=%v %s", got.Status, got.Replayed(), got.Body)
	}
	if refused == 0 {
		t.Error("no retry was refused while the dead process's lease was alive")
	}
	rec, err := store.Get(ctxFor(t, 5*time.Second), "shop", "crash-1")
	if err != nil || rec.State != dedupe.StateDone || rec.Takeovers != 1 {
		t.Fatalf("record after takeover: state %s takeovers %d, %v; want done and 1", rec.State, rec.Takeovers, err)
	}
	if n := site.Executions("crash-1"); n != 2 {
		t.Fatalf("site ran %d times, want 2 (the dead process's call and the takeover)", n)
	}
	if again := proxytest.Post(t, url, body); !again.Replayed() {
		t.Fatalf("delivery after the takeover not replayed: %d", again.Status)
	}
}

// A refused conflict accepted through the proxy runs once at the site
// (proxytest.RunAcceptConflict).
func TestPostgresAcceptConflict(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	proxytest.RunAcceptConflict(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) })
}
