package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/tcpsite"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// countConns counts the connections a site's server accepts: pass the
// function to proxytest.NewSiteWith.
func countConns() (*atomic.Int64, func(*http.Server)) {
	n := new(atomic.Int64)
	return n, func(s *http.Server) {
		s.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				n.Add(1)
			}
		}
	}
}

func event(i int) string { return fmt.Sprintf(`{"id":"evt_%d"}`, i) }

// Webhook forwards share a connection while the site's answers keep it
// open (HTTP/1.1, a length, no Connection: close), and every event still
// runs once; a site that says Connection: close gets a new connection for
// every forward, and so does a sender whose ambiguous forwards are held
// for a person (trap 32).
func TestKeptConnections(t *testing.T) {
	for _, tt := range []struct {
		name      string
		close     bool
		config    string
		wantConns func(n int64) bool
	}{
		{"keep-alive site", false, shopConfig, func(n int64) bool { return n == 1 }},
		{"site says Connection: close", true, shopConfig, func(n int64) bool { return n == 20 }},
		{"ambiguous: hold", false, shopConfig + "    ambiguous: hold\n", func(n int64) bool { return n == 20 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var closeAsked atomic.Int64
			conns, counting := countConns()
			site := proxytest.NewSiteWith(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Close {
					closeAsked.Add(1)
				}
				if tt.close {
					w.Header().Set("Connection", "close")
				}
				_, _ = io.WriteString(w, `{"ok":true}`)
			}, counting)
			px := proxytest.StartProxy(t, newStore(t), site.URL, tt.config)
			const n = 20
			for i := range n {
				if r := proxytest.Post(t, px.URL+"/hooks/shop", event(i)); r.Status != 200 || string(r.Body) != `{"ok":true}` {
					t.Fatalf("event %d: %d %s", i, r.Status, r.Body)
				}
			}
			for i := range n {
				if got := site.Executions("evt_" + strconv.Itoa(i)); got != 1 {
					t.Fatalf("evt_%d ran %d times", i, got)
				}
			}
			if !tt.wantConns(conns.Load()) {
				t.Fatalf("%d forwards on %d connections (%d asked to close)", n, conns.Load(), closeAsked.Load())
			}
		})
	}
}

// keepAliveSite is a raw HTTP/1.1 site: it answers each request on a
// connection with a length and without Connection: close, runs after
// (when set) once the answer is written, and counts runs per event and
// the connections it accepted.
type keepAliveSite struct {
	addr  string
	conns *atomic.Int64
	mu    sync.Mutex
	runs  map[string]int
}

func newKeepAliveSite(t *testing.T, after func(c net.Conn, served int) (stop bool)) *keepAliveSite {
	t.Helper()
	s := &keepAliveSite{runs: map[string]int{}}
	s.addr, s.conns = tcpsite.Start(t, func(c net.Conn, br *bufio.Reader) {
		for served := 1; ; served++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			b, _ := io.ReadAll(req.Body)
			s.mu.Lock()
			s.runs[proxytest.EventID(req, b)]++
			s.mu.Unlock()
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}")
			if after != nil && after(c, served) {
				return
			}
		}
	})
	return s
}

func (s *keepAliveSite) ran(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[id]
}

// A kept connection is written to only when the socket shows nothing
// waiting on it. A site that closed its end after answering (an idle
// timeout, a restart) has its FIN on the socket before the next forward:
// that forward dials, reaches the handler and is answered, where writing
// into the closed connection would have broken it (an ambiguous 502, the
// claim released, the sender made to retry). A site that sent more than
// its answer has its connection dropped too.
func TestKeptConnectionProvenQuiet(t *testing.T) {
	for _, tt := range []struct {
		name  string
		after func(c net.Conn, served int) bool
	}{
		{"site closed it", func(net.Conn, int) bool { return true }},
		{"bytes after the answer", func(c net.Conn, _ int) bool {
			time.Sleep(5 * time.Millisecond) // after the answer was read
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale")
			return false
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			site := newKeepAliveSite(t, tt.after)
			px := proxytest.StartProxy(t, newStore(t), "http://"+site.addr, shopConfig)
			const n = 5
			for i := range n {
				if i > 0 {
					time.Sleep(20 * time.Millisecond) // the site's FIN or bytes arrive
				}
				if r := proxytest.Post(t, px.URL+"/hooks/shop", event(i)); r.Status != 200 || string(r.Body) != `{"ok":true}` {
					t.Fatalf("event %d: %d %s", i, r.Status, r.Body)
				}
			}
			for i := range n {
				if got := site.ran("evt_" + strconv.Itoa(i)); got != 1 {
					t.Fatalf("evt_%d ran %d times", i, got)
				}
			}
			if got := site.conns.Load(); got != n {
				t.Fatalf("%d forwards on %d connections, want one each", n, got)
			}
		})
	}
}

// A connection idle for --upstream-keepalive or longer is not used again.
func TestKeptConnectionAgeBound(t *testing.T) {
	site := newKeepAliveSite(t, nil)
	u := proxytest.Start(t, newStore(t), "http://"+site.addr, shopConfig)
	// proxytest runs the default, 500 ms: one pause shorter, one longer.
	for i, pause := range []time.Duration{0, 100 * time.Millisecond, 700 * time.Millisecond} {
		time.Sleep(pause)
		if r := proxytest.Post(t, u.Server.URL+"/hooks/shop", event(i)); r.Status != 200 {
			t.Fatalf("event %d: %d %s", i, r.Status, r.Body)
		}
	}
	if got := site.conns.Load(); got != 2 {
		t.Fatalf("3 forwards, the last after 700 ms idle, on %d connections; want 2", got)
	}
}

// The at-most-once forward holds even against a site that closes kept
// connections at the worst moments: a Go server whose idle timeout (5 ms)
// is far below the proxy's keep-alive bound, two proxy instances on one
// store, 32 senders each retrying until answered, with pauses around the
// site's idle timeout so that closes meet writes. A request written into a
// connection the site was closing never reached the handler; it is
// answered as ambiguous (the claim released) and the retry runs it. No
// event runs twice, every event runs once.
func TestKeptConnectionClosedUnderTheWrite(t *testing.T) {
	site := proxytest.NewSiteWith(t, nil, func(s *http.Server) { s.IdleTimeout = 5 * time.Millisecond })
	store := newStore(t)
	cfg := shopConfig + "    in_progress: reject\n"
	ins := []*proxytest.Instance{proxytest.Start(t, store, site.URL, cfg), proxytest.Start(t, store, site.URL, cfg)}
	pxs := []*httptest.Server{ins[0].Server, ins[1].Server}
	const senders, perSender = 32, 15
	var retried atomic.Int64
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range perSender {
				id := g*perSender + j
				time.Sleep(time.Duration(3+id%5) * time.Millisecond)
				for try := 0; ; try++ {
					r := proxytest.Post(t, pxs[(id+try)%2].URL+"/hooks/shop", event(id))
					if r.Status == 200 {
						break
					}
					if try == 50 {
						t.Errorf("evt_%d: still %d after %d tries: %s", id, r.Status, try, r.Body)
						return
					}
					retried.Add(1)
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	for id := range senders * perSender {
		if got := site.Executions("evt_" + strconv.Itoa(id)); got != 1 {
			t.Errorf("evt_%d ran %d times", id, got)
		}
	}
	t.Logf("%d events, %d retries", senders*perSender, retried.Load())
	// The log says which failures came on a kept connection: an operator
	// lays them next to the site's restarts.
	const kept = "on a connection kept from an earlier forward"
	if retried.Load() > 0 && !strings.Contains(ins[0].Logs.String()+ins[1].Logs.String(), kept) {
		t.Errorf("%d retries, and no log line says %q", retried.Load(), kept)
	}
}
