package faults_test

// An unsigned flood of made-up names, against a real `hookonce serve`:
// what anyone who can reach the port may make hookonce keep. Every
// request of the flood is one a stranger can send without a secret: form
// fields with random names on a path whose senders all have match.when
// (no sender takes them: forwarded to the site, counted with their shape),
// JSON with random field names on random paths under an unsigned
// sender's prefix (no event id: refused, counted with their shape), and
// unsigned JSON on random paths under a signed sender's prefix (refused
// for the signature). Meanwhile a genuine sender delivers signed events.
//
// Expected, written down before the run (issue "the border between a
// sender's delivery and not ours", measured before the fix: SQLite at
// 562,000 counter rows and 386 MB after 4.5 minutes, serve at 870 MB RSS,
// a restarted serve at 592 MB before any traffic; a maxmemory Redis full
// after 75 s, then 276 of 300 genuine webhooks answered 503):
//
//   - the traffic counters keep at most dedupe.MaxTrafficShapes shapes
//     per day, sender, path and outcome (and one "other shapes" counter),
//     on the paths the config writes, never the client's;
//   - serve's peak RSS stays under 256 MiB, the store grows under 64 MiB;
//   - a restarted serve answers a genuine delivery within 5 s;
//   - genuine deliveries during and after the flood get a 2xx at the first
//     try (at least 99% of them; a sender retries the rest) and every one
//     runs exactly once at the site.
//
// The short form floods for 5 s; the full form, 60 s from 8 connections
// on SQLite and on Redis with maxmemory 64mb and noeviction:
//
//	HOOKONCE_FLOOD=full go test ./faults -run TestUnsignedFlood -v -timeout 20m
//
// HOOKONCE_FLOOD_STORE=sqlite or redis runs one store only.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
	"github.com/hookonce/hookonce/internal/testkit/servetest"
)

const floodSecret = "whsec_flood"

const floodConfig = `
senders:
  - name: stripe
    preset: stripe
    match: { path: /hooks/stripe/* }
    signature: { secret_env: FLOOD_STRIPE_SECRET }
  - name: plain
    match: { path: /hooks/plain/* }
    key: [ { body: id } ]
  - name: shop
    match: { path: /bitrix/tools/sale_ps_result.php, when: [ { form: kind, equals: pay } ] }
    key: [ { form: id } ]
`

func floodStripeSig(body string, ts int64) string {
	t := strconv.FormatInt(ts, 10)
	m := hmac.New(sha256.New, []byte(floodSecret))
	m.Write([]byte(t + "." + body))
	return "t=" + t + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// floodResult is what one store's run measured.
type floodResult struct {
	store                        string
	duration                     time.Duration
	requests                     int64 // flood requests answered
	peakRSS, storeGrowth         int64 // bytes
	restartAnswer                time.Duration
	restartRSS                   int64
	genuine, firstTry, ranOnce   int
	counters, mostInGroup        int
	unmatchedLines, unmatchedAll int
}

func (r floodResult) String() string {
	return fmt.Sprintf("%s, %v flood from 8 connections: %d flood requests; serve peak RSS %.1f MiB; store grew %.1f MiB; "+
		"restarted serve answered in %v at %.1f MiB RSS; genuine deliveries: %d, %d 2xx at the first try (%.2f%%), %d ran exactly once; "+
		"%d readiness counters, at most %d in one group; %d unmatched log lines for %d unmatched requests",
		r.store, r.duration, r.requests, float64(r.peakRSS)/(1<<20), float64(r.storeGrowth)/(1<<20),
		r.restartAnswer.Round(time.Millisecond), float64(r.restartRSS)/(1<<20), r.genuine, r.firstTry,
		100*float64(r.firstTry)/float64(max(r.genuine, 1)), r.ranOnce, r.counters, r.mostInGroup, r.unmatchedLines, r.unmatchedAll)
}

func TestUnsignedFlood(t *testing.T) {
	needBinary(t)
	duration := 5 * time.Second
	if os.Getenv("HOOKONCE_FLOOD") == "full" {
		duration = 60 * time.Second
	}
	for _, kind := range []string{"sqlite", "redis"} {
		if only := os.Getenv("HOOKONCE_FLOOD_STORE"); only != "" && only != kind {
			continue
		}
		t.Run(kind, func(t *testing.T) {
			res := runFlood(t, kind, duration)
			t.Log(res)
		})
	}
}

func runFlood(t *testing.T, kind string, duration time.Duration) floodResult {
	res := floodResult{store: kind, duration: duration}
	var dsn string
	var size func() int64
	switch kind {
	case "sqlite":
		dir := t.TempDir()
		dsn = "sqlite:" + filepath.Join(dir, "hookonce.db")
		size = func() int64 {
			var n int64
			files, _ := filepath.Glob(filepath.Join(dir, "hookonce.db*"))
			for _, f := range files {
				if st, err := os.Stat(f); err == nil {
					n += st.Size()
				}
			}
			return n
		}
		res.store = "SQLite"
	case "redis":
		srv := redistest.Start(t, "--maxmemory", "64mb", "--maxmemory-policy", "noeviction")
		dsn = srv.URL()
		rc := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
		t.Cleanup(func() { rc.Close() })
		size = func() int64 {
			info, err := rc.Info(context.Background(), "memory").Result()
			if err != nil {
				t.Fatalf("redis INFO memory: %v", err)
			}
			for _, line := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
					n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					return n
				}
			}
			t.Fatal("redis INFO memory has no used_memory")
			return 0
		}
		res.store = "Redis (maxmemory 64mb, noeviction)"
	}

	site := newSite(t, nil)
	opts := serveOpts{store: dsn, upstream: site.URL, config: floodConfig, env: []string{"FLOOD_STRIPE_SECRET=" + floodSecret}}
	p := startServe(t, opts)
	before := size()

	genuine := newClient(t, 10*time.Second)
	var gmu sync.Mutex
	var ids []string
	deliver := func(id string) {
		body := fmt.Sprintf(`{"id":%q,"object":"event","type":"charge.succeeded"}`, id)
		req := func() reply {
			r, err := http.NewRequest(http.MethodPost, p.URL+"/hooks/stripe/webhook", strings.NewReader(body))
			if err != nil {
				return reply{err: err}
			}
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Stripe-Signature", floodStripeSig(body, time.Now().Unix()))
			resp, err := genuine.Do(r)
			if err != nil {
				return reply{err: err}
			}
			resp.Body.Close()
			return reply{status: resp.StatusCode}
		}
		first := req()
		ok := first.ok()
		for i := 0; !ok && i < 10; i++ { // a sender retries
			time.Sleep(200 * time.Millisecond)
			ok = req().ok()
		}
		gmu.Lock()
		ids = append(ids, id)
		if first.ok() {
			res.firstTry++
		} else {
			t.Logf("genuine %s at the first try: %v", id, first)
		}
		gmu.Unlock()
	}

	// The flood: 8 connections, each its own client with one connection.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var answered, unmatched atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, DisableCompression: true}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			name := func() string { return strconv.FormatUint(rng.Uint64(), 36) }
			for {
				select {
				case <-stop:
					return
				default:
				}
				var target, ct, body string
				switch w % 4 {
				case 0, 1: // no sender takes it: forwarded to the site
					f := url.Values{}
					for range 4 {
						f.Set(name(), "1")
					}
					target, ct, body = p.URL+"/bitrix/tools/sale_ps_result.php", "application/x-www-form-urlencoded", f.Encode()
					unmatched.Add(1)
				case 2: // an unsigned sender's prefix, no event id
					target, ct = p.URL+"/hooks/plain/"+name()+".php", "application/json"
					body = fmt.Sprintf(`{%q:1,%q:2,%q:3}`, name(), name(), name())
				case 3: // a signed sender's prefix, no signature
					target, ct = p.URL+"/hooks/stripe/"+name(), "application/json"
					body = fmt.Sprintf(`{"id":"evt_%s",%q:1}`, name(), name())
				}
				req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("Content-Type", ct)
				resp, err := c.Do(req)
				if err != nil {
					continue
				}
				resp.Body.Close()
				answered.Add(1)
			}
		}()
	}
	// Genuine deliveries during the flood, about ten a second, and the
	// readiness report read as an operator would.
	began := time.Now()
	n := 0
	for next := began; time.Since(began) < duration; next = next.Add(100 * time.Millisecond) {
		time.Sleep(time.Until(next))
		n++
		deliver(fmt.Sprintf("evt_during_%d", n))
		if n%50 == 0 {
			readinessAnswers(t, p)
		}
	}
	close(stop)
	wg.Wait()
	res.requests = answered.Load()
	res.unmatchedAll = int(unmatched.Load())
	// And after it.
	for i := range 50 {
		deliver(fmt.Sprintf("evt_after_%d", i))
	}
	readinessAnswers(t, p)
	res.peakRSS = procStatus(t, p.Pid(), "VmHWM")
	res.unmatchedLines = countUnmatchedLines(p)
	p.Terminate(t)
	res.storeGrowth = size() - before

	// A restart answers a genuine delivery within 5 s.
	start := time.Now()
	p2 := launch(t, opts)
	serving := p2.WaitLogWithin(t, "hookonce serving", 30*time.Second)
	p2.URL = "http://" + fmt.Sprint(serving["listen"])
	p = p2
	deliver("evt_restart_0")
	res.restartAnswer = time.Since(start)
	for i := 1; i < 20; i++ {
		deliver(fmt.Sprintf("evt_restart_%d", i))
	}
	time.Sleep(time.Second) // the readiness gauge's first run is done by then
	res.restartRSS = procStatus(t, p2.Pid(), "VmRSS")

	// Every genuine delivery ran exactly once.
	res.genuine = len(ids)
	for _, id := range ids {
		if n := site.Executions(id); n == 1 {
			res.ranOnce++
		} else {
			t.Errorf("genuine %s ran %d times at the site, want once", id, n)
		}
	}

	// The counters, as the store keeps them.
	store := servetest.OpenStore(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	totals, err := store.(dedupe.TrafficReader).TrafficTotals(ctx, time.Time{})
	if err != nil {
		t.Fatalf("TrafficTotals: %v", err)
	}
	cs, err := store.(dedupe.TrafficReader).Traffic(ctx, time.Time{})
	if err != nil {
		t.Fatalf("Traffic: %v", err)
	}
	res.counters = len(cs)
	groups := map[string]int{}
	for _, c := range cs {
		g := c.Day.Format("2006-01-02") + "|" + c.Sender + "|" + c.Path + "|" + c.Outcome
		groups[g]++
		res.mostInGroup = max(res.mostInGroup, groups[g])
		switch c.Path {
		case "/hooks/stripe/*", "/hooks/plain/*", "/bitrix/tools/sale_ps_result.php":
		default:
			t.Errorf("a counter on a path the config does not write: %+v", c)
		}
	}
	var sum, tsum int64
	for _, c := range cs {
		sum += c.N
	}
	for _, c := range totals {
		tsum += c.N
	}
	if sum != tsum {
		t.Errorf("the totals sum to %d deliveries, the counters to %d", tsum, sum)
	}
	p2.Terminate(t)

	// What the issue asks, checked on every form; the short one floods
	// for 5 s only, so the bounds hold with room.
	const mib = 1 << 20
	// A group's shapes, its "other shapes", and one counter per status.
	if res.mostInGroup > dedupe.MaxTrafficShapes+3 {
		t.Errorf("a group of counters has %d, want at most %d shapes and the rest folded", res.mostInGroup, dedupe.MaxTrafficShapes)
	}
	if res.peakRSS >= 256*mib {
		t.Errorf("serve's peak RSS %d MiB, want under 256 MiB", res.peakRSS/mib)
	}
	if res.storeGrowth >= 64*mib {
		t.Errorf("the store grew %d MiB, want under 64 MiB", res.storeGrowth/mib)
	}
	if res.restartAnswer >= 5*time.Second {
		t.Errorf("the restarted serve answered after %v, want within 5 s", res.restartAnswer)
	}
	if res.firstTry*100 < res.genuine*99 {
		t.Errorf("%d of %d genuine deliveries got a 2xx at the first try, want at least 99%%", res.firstTry, res.genuine)
	}
	if res.unmatchedLines > 10+int(duration/time.Second)+2 {
		t.Errorf("%d unmatched log lines for %d requests in %v, want ten and then one a second", res.unmatchedLines, res.unmatchedAll, duration)
	}
	return res
}

// readinessAnswers reads the readiness report from the admin API, as an
// operator (or a dashboard) would during the flood.
func readinessAnswers(t *testing.T, p *servetest.Server) {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(p.Admin + "/v1/readiness")
	if err != nil {
		t.Errorf("readiness: %v", err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("readiness: %d", resp.StatusCode)
	}
}

// countUnmatchedLines counts the log lines of requests no sender took.
func countUnmatchedLines(p *servetest.Server) int {
	n := 0
	p.Find(func(line string, l map[string]any) bool {
		if l["msg"] == "webhook" && l["outcome"] == "unmatched" {
			n++
		}
		return false
	})
	return n
}
