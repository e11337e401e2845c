package proxy_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/tcpsite"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// A site that answers before it has read the whole request (net/http past
// 256 KB unread, a framework keyed on a header) and closes the connection:
// hookonce's write fails, yet the answer is on the socket. It is the site's
// answer, never "unreachable" (trap 31 in ARCHITECTURE.md).

const earlyConfig = `
max_body: 2MiB
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
    upstream_timeout: 5s
    lease: 6s
`

// bigBody is 900 KB: more than a site reads before answering, more than
// the socket buffers hold.
var bigBody = `{"id":"big","pad":"` + strings.Repeat("x", 900<<10) + `"}`

// earlyCounter counts executions per event id (X-Event-Id).
type earlyCounter struct {
	mu    sync.Mutex
	execs map[string]int
}

func (c *earlyCounter) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.execs == nil {
		c.execs = map[string]int{}
	}
	c.execs[id]++
}

func (c *earlyCounter) get(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.execs[id]
}

// postEvent sends body as event id to the proxy over a fresh connection.
func postEvent(t *testing.T, px *httptest.Server, id, body string) proxytest.Reply {
	t.Helper()
	return proxytest.Post(t, px.URL+"/hooks/shop", body, "X-Event-Id", id)
}

// Three deliveries of one 900 KB event to a site that answers without
// reading the body: one execution, the first answer stored and replayed.
func TestEarlyAnswerIsStoredAndReplayed(t *testing.T) {
	sites := map[string]func(t *testing.T, execs *earlyCounter) string{
		// Go's server answers and closes the connection once the handler
		// returned with more than 256 KB unread.
		"net/http": func(t *testing.T, execs *earlyCounter) string {
			site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id := r.Header.Get("X-Event-Id")
				execs.add(id)
				w.Header().Set("Content-Type", "text/plain")
				_, _ = io.WriteString(w, "done "+id)
			}))
			t.Cleanup(site.Close)
			return site.URL
		},
		// A raw site reads the headers, writes a whole answer and closes
		// with most of the body unread (the kernel resets the connection).
		"raw": func(t *testing.T, execs *earlyCounter) string {
			addr := rawEarlySite(t, func(c net.Conn, req *http.Request) {
				id := req.Header.Get("X-Event-Id")
				execs.add(id)
				body := "done " + id
				_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
			})
			return "http://" + addr
		},
	}
	for name, start := range sites {
		t.Run(name, func(t *testing.T) {
			execs := &earlyCounter{}
			store := newStore(t)
			px := proxytest.Start(t, store, start(t, execs), earlyConfig)
			var replies []proxytest.Reply
			for range 3 {
				replies = append(replies, postEvent(t, px.Server, "big", bigBody))
			}
			if n := execs.get("big"); n != 1 {
				t.Errorf("the handler ran %d times for one event, want 1", n)
			}
			first := replies[0]
			if first.Status != 200 || string(first.Body) != "done big" || first.Replayed() {
				t.Fatalf("first delivery: %d %q replayed=%v, want the site's 200", first.Status, first.Body, first.Replayed())
			}
			for i, r := range replies[1:] {
				if r.Status != 200 || !bytes.Equal(r.Body, first.Body) || !r.Replayed() {
					t.Errorf("delivery %d: %d %q replayed=%v, want the stored answer replayed", i+2, r.Status, r.Body, r.Replayed())
				}
			}
			rec, err := get(t, store, "shop", "big")
			if err != nil || rec.State != dedupe.StateDone {
				t.Fatalf("record %+v, %v: want done", rec, err)
			}
			if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "shop", "outcome", "duplicate"); n != 2 {
				t.Errorf("%v duplicates counted, want 2", n)
			}
		})
	}
}

// A site that reads the headers and resets the connection without an
// answer may have run the handler: ambiguous (row 10a), never unreachable.
func TestResetAfterHeadersIsAmbiguous(t *testing.T) {
	for _, size := range []string{"small", "900KB"} {
		body := `{"id":"r"}`
		if size != "small" {
			body = bigBody
		}
		for _, mode := range []string{"release", "hold"} {
			t.Run(size+"/"+mode, func(t *testing.T) {
				execs := &earlyCounter{}
				addr := rawEarlySite(t, func(c net.Conn, req *http.Request) {
					execs.add(req.Header.Get("X-Event-Id"))
					_ = c.(*net.TCPConn).SetLinger(0) // RST, no answer
				})
				store := newStore(t)
				px := proxytest.Start(t, store, "http://"+addr, strings.Replace(earlyConfig, "lease: 6s", "lease: 6s\n    ambiguous: "+mode, 1))
				got := postEvent(t, px.Server, "r", body)
				if got.Status != http.StatusBadGateway || !strings.Contains(string(got.Body), "may have run") {
					t.Fatalf("status %d %s, want 502 saying the handler may have run", got.Status, got.Body)
				}
				if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "shop", "outcome", "ambiguous"); n != 1 {
					t.Errorf("%v ambiguous outcomes counted, want 1 (logs: %s)", n, px.Logs)
				}
				if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "shop", "outcome", "released"); n != 0 {
					t.Errorf("%v counted as released (unreachable), want 0", n)
				}
				switch mode {
				case "release":
					proxytest.AssertFreed(t, store, "shop", "r")
				case "hold":
					rec, err := get(t, store, "shop", "r")
					if err != nil || rec.State != dedupe.StateUnknown {
						t.Fatalf("record %+v, %v: want unknown (held)", rec, err)
					}
					if again := postEvent(t, px.Server, "r", body); again.Status != http.StatusConflict {
						t.Errorf("retry of a held event: %d, want 409", again.Status)
					}
				}
				if n := execs.get("r"); n != 1 {
					t.Errorf("the site saw the request %d times, want 1", n)
				}
			})
		}
	}
}

// A site nobody listens at is unreachable: 502, claim released, counted
// released (not ambiguous), and the retry runs when the site is back.
func TestDialFailureIsUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	store := newStore(t)
	px := proxytest.Start(t, store, "http://"+addr, earlyConfig)
	got := postEvent(t, px.Server, "d", bigBody)
	if got.Status != http.StatusBadGateway || !strings.Contains(string(got.Body), "could not be reached") {
		t.Fatalf("status %d %s, want 502 unreachable", got.Status, got.Body)
	}
	proxytest.AssertFreed(t, store, "shop", "d")
	if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "shop", "outcome", "released"); n != 1 {
		t.Errorf("%v released outcomes, want 1", n)
	}
	if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "shop", "outcome", "ambiguous"); n != 0 {
		t.Errorf("%v ambiguous outcomes, want 0", n)
	}
}

// rawEarlySite reads each request's headers (never its body) and runs
// handle; the connection is closed when handle returns.
func rawEarlySite(t *testing.T, handle func(c net.Conn, req *http.Request)) string {
	t.Helper()
	addr, _ := tcpsite.Start(t, func(c net.Conn, br *bufio.Reader) {
		if req, err := http.ReadRequest(br); err == nil {
			handle(c, req)
		}
	})
	return addr
}

// startTLS runs a proxy in front of the https:// site, trusting its
// certificate; the forward goes through Go's transport.
func startTLS(t *testing.T, store dedupe.Store, site *httptest.Server, configYAML string) (*httptest.Server, *prometheus.Registry) {
	t.Helper()
	c, err := contract.Parse([]byte(configYAML), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(site.URL)
	reg := prometheus.NewRegistry()
	p, err := proxy.New(proxy.Options{
		Upstream: u, Contract: c, Store: store, Registerer: reg,
		Transport: site.Client().Transport.(*http.Transport).Clone(),
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	px := httptest.NewServer(p)
	t.Cleanup(func() { px.Close(); _ = p.Close(t.Context()) })
	return px, reg
}

// To an https:// site the forward goes through Go's transport, which reads
// an early answer only when it arrives before the write error (verified:
// its persistConn reads and writes concurrently and returns whichever it
// sees first; on a write error it closes the connection and returns the
// raw write error). The answer it did read is stored; otherwise the
// outcome is ambiguous, never unreachable: the headers were written.
func TestHTTPSEarlyAnswerIsNeverUnreachable(t *testing.T) {
	execs := &earlyCounter{}
	site := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		execs.add(r.Header.Get("X-Event-Id"))
		_, _ = io.WriteString(w, "done")
	}))
	t.Cleanup(site.Close)
	store := newStore(t)
	px, reg := startTLS(t, store, site, strings.Replace(earlyConfig, "lease: 6s", "lease: 6s\n    ambiguous: hold", 1))
	const n = 10
	answered := 0
	for i := range n {
		id := fmt.Sprint("tls", i)
		got := postEvent(t, px, id, bigBody)
		rec, err := get(t, store, "shop", id)
		switch {
		case got.Status == 200 && string(got.Body) == "done" && err == nil && rec.State == dedupe.StateDone:
			answered++
		case got.Status == http.StatusBadGateway && strings.Contains(string(got.Body), "may have run") && err == nil && rec.State == dedupe.StateUnknown:
		default:
			t.Errorf("%s: %d %s, record %+v %v: want the answer stored, or ambiguous and held", id, got.Status, got.Body, rec, err)
		}
		if again := postEvent(t, px, id, bigBody); again.Status != 200 && again.Status != http.StatusConflict {
			t.Errorf("%s repeated: %d, want the replay or 409 (held)", id, again.Status)
		}
		if e := execs.get(id); e != 1 {
			t.Errorf("%s ran %d times, want 1", id, e)
		}
	}
	if r := proxytest.Metric(t, reg, "hookonce_requests_total", "sender", "shop", "outcome", "released"); r != 0 {
		t.Errorf("%v forwards counted released (unreachable), want 0", r)
	}
	t.Logf("Go's transport read the early answer %d times of %d", answered, n)
}

// An https:// site that reads the headers and resets: ambiguous.
func TestHTTPSResetAfterHeadersIsAmbiguous(t *testing.T) {
	execs := &earlyCounter{}
	site := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		execs.add(r.Header.Get("X-Event-Id"))
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		if tc, ok := c.(*tls.Conn); ok {
			_ = tc.NetConn().(*net.TCPConn).SetLinger(0)
			tc.NetConn().Close()
		}
	}))
	t.Cleanup(site.Close)
	store := newStore(t)
	px, reg := startTLS(t, store, site, earlyConfig)
	for _, body := range []string{`{"id":"small"}`, bigBody} {
		id := fmt.Sprint("reset", len(body))
		got := postEvent(t, px, id, body)
		if got.Status != http.StatusBadGateway || !strings.Contains(string(got.Body), "may have run") {
			t.Errorf("%s: %d %s, want 502 ambiguous", id, got.Status, got.Body)
		}
		proxytest.AssertFreed(t, store, "shop", id)
		if e := execs.get(id); e != 1 {
			t.Errorf("%s ran %d times, want 1", id, e)
		}
	}
	if a := proxytest.Metric(t, reg, "hookonce_requests_total", "sender", "shop", "outcome", "ambiguous"); a != 2 {
		t.Errorf("%v ambiguous outcomes, want 2", a)
	}
}
