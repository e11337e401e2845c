package proxy_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

var updateWire = flag.Bool("update-wire", false, "rewrite testdata/sitecall_wire.golden from this run")

// TestClaimedForwardWire pins, byte for byte, what a claimed delivery's
// forward does on the wire: the request the site reads (request line,
// headers, body), the answer the sender reads, the answer a repeat is
// replayed, and the decision logged, for deliveries that carry what a
// proxy hop must not pass on (hop-by-hop headers and the ones a
// Connection list names, forged client addresses and forward keys, an
// Expect, a chunked body, a query net/url would re-encode) and site
// answers with 1xx informational answers first, hop-by-hop headers,
// trailers (announced or not), no length, a body past max_stored_body,
// an answer cut short, and a 101. Each runs against an http:// site
// (oneshot) and an https:// one (Go's transport), with the site named by
// a bare address or by a base path and query, behind a trusted proxy or
// not. The golden file was first written by the ReverseProxy-based
// forward this one replaced (see the commit that added it).
func TestClaimedForwardWire(t *testing.T) {
	var b strings.Builder
	for _, setup := range wireSetups {
		runWireSetup(t, &b, setup)
	}
	out := loopback.ReplaceAllString(b.String(), "127.0.0.1:PORT")
	golden := filepath.Join("testdata", "sitecall_wire.golden")
	if *updateWire {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := out; got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("transcript differs from %s at line %d:\n got: %q\nwant: %q\n(go test -run TestClaimedForwardWire -update-wire rewrites it)", golden, i+1, g, w)
			}
		}
	}
}

type wireSetup struct {
	name    string
	https   bool
	suffix  string // appended to the site's URL: a base path and query
	trusted bool   // 127.0.0.1 is a trusted proxy
}

var wireSetups = []wireSetup{
	{name: "http"},
	{name: "http, base path and query", suffix: "/base/?site=1"},
	{name: "http, trusted proxy", trusted: true},
	{name: "https", https: true},
	{name: "https, trusted proxy, base path", https: true, suffix: "/base", trusted: true},
}

const wireConfig = `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
    upstream_timeout: 3s
  - name: small
    match: { path: /hooks/small }
    key: [ { header: X-Event-Id } ]
    max_stored_body: 16
    upstream_timeout: 3s
`

// wireCase is one delivery: the raw request a sender writes (the event id
// is X-Event-Id) and the raw answer the site gives.
type wireCase struct {
	name   string
	path   string
	query  string
	header string // raw header lines, each ending in \r\n
	body   string
	chunk  bool   // send the body chunked, with a trailer
	answer string // the site's raw answer; the site closes after it
}

var wireCases = []wireCase{
	{name: "plain", path: "/hooks/shop", body: `{"a":1}`,
		header: "Content-Type: application/json\r\nUser-Agent: sender/1.0\r\nX-Custom: one\r\nX-Custom: two\r\n",
		answer: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nX-Site: yes\r\nSet-Cookie: s=1\r\nX-Multi: a\r\nX-Multi: b\r\n\r\nok"},
	{name: "forged addresses and key, no user agent", path: "/hooks/shop", query: "a=1&b=two", body: `{"a":2}`,
		header: "Content-Type: application/json\r\nX-Forwarded-For: 10.9.9.9, 10.8.8.8\r\nX-Real-IP: 10.9.9.9\r\nForwarded: for=10.9.9.9\r\nClient-Ip: 10.9.9.9\r\nX-Forwarded-Host: forged.example\r\nX-Forwarded-Proto: https\r\nIdempotency-Key: forged\r\nIdempotency_Key: forged2\r\n",
		answer: "HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\nmade"},
	{name: "hop-by-hop and Connection list, Expect", path: "/hooks/shop", body: `{"a":3}`,
		header: "Connection: close, X-Drop-Me\r\nX-Drop-Me: gone\r\nKeep-Alive: timeout=5\r\nTe: trailers\r\nUpgrade: websocket\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nExpect: 100-continue\r\nX-Keep: kept\r\n",
		answer: "HTTP/1.1 200 OK\r\nConnection: X-Site-Hop\r\nX-Site-Hop: hop\r\nKeep-Alive: timeout=5\r\nProxy-Authenticate: Basic\r\nUpgrade: h2c\r\nX-Site-Kept: kept\r\nContent-Length: 3\r\n\r\nhop"},
	{name: "query net/url would re-encode", path: "/hooks/shop", query: "a=1;b=2&c=%zz&d=%41&e", body: `{"a":4}`,
		answer: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nq"},
	{name: "chunked request with a trailer", path: "/hooks/shop", body: `{"a":5}`, chunk: true,
		answer: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nc"},
	{name: "empty body", path: "/hooks/shop", body: "",
		answer: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nempty"},
	{name: "1xx answers first", path: "/hooks/shop", body: `{"a":6}`,
		answer: "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-After: 1xx\r\n\r\nfinal"},
	{name: "chunked answer with an announced trailer", path: "/hooks/shop", body: `{"a":7}`,
		answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\nContent-Type: text/plain\r\n\r\n5\r\nhello\r\n0\r\nX-Sum: abc\r\n\r\n"},
	{name: "chunked answer with an unannounced trailer", path: "/hooks/shop", body: `{"a":8}`,
		answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-Late: late\r\n\r\n"},
	{name: "answer read to the end of the connection", path: "/hooks/shop", body: `{"a":9}`,
		answer: "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close"},
	{name: "no content", path: "/hooks/shop", body: `{"a":10}`,
		answer: "HTTP/1.1 204 No Content\r\nX-Nothing: 1\r\n\r\n"},
	{name: "site failure", path: "/hooks/shop", body: `{"a":11}`,
		answer: "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops"},
	{name: "past max_stored_body", path: "/hooks/small", body: `{"a":12}`,
		answer: "HTTP/1.1 200 OK\r\nContent-Length: 40\r\nX-Big: 1\r\n\r\n0123456789012345678901234567890123456789"},
	{name: "past max_stored_body, chunked with a trailer", path: "/hooks/small", body: `{"a":13}`,
		answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n14\r\n01234567890123456789\r\n14\r\n01234567890123456789\r\n0\r\nX-Sum: big\r\n\r\n"},
	{name: "answer cut short", path: "/hooks/shop", body: `{"a":14}`,
		answer: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this"},
	{name: "answer cut short past max_stored_body", path: "/hooks/small", body: `{"a":15}`,
		answer: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789012345678901234567890123456789"},
	{name: "101 switching protocols", path: "/hooks/shop", body: `{"a":16}`,
		answer: "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"},
}

func runWireSetup(t *testing.T, out *strings.Builder, setup wireSetup) {
	t.Helper()
	var mu sync.Mutex
	got := map[string]string{} // event id: the raw request the site read
	answers := map[string]string{}
	for i, c := range wireCases {
		answers[fmt.Sprint("w", i)] = c.answer
	}
	handle := func(conn net.Conn) {
		defer conn.Close()
		var raw bytes.Buffer
		br := bufio.NewReader(io.TeeReader(conn, &raw))
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		id := req.Header.Get("X-Event-Id")
		mu.Lock()
		got[id] = raw.String()
		mu.Unlock()
		_, _ = io.WriteString(conn, answers[id])
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	siteURL := "http://" + ln.Addr().String()
	var opts func(*proxy.Options)
	if setup.https {
		srv := httptest.NewUnstartedServer(nil)
		srv.StartTLS()
		cfg, tr := srv.TLS.Clone(), srv.Client().Transport.(*http.Transport).Clone()
		srv.Close()
		ln = tls.NewListener(ln, cfg)
		siteURL = "https://" + ln.Addr().String()
		opts = func(o *proxy.Options) { o.Transport = tr; o.KeepIdle = 0 }
	} else {
		opts = func(o *proxy.Options) { o.KeepIdle = 0 }
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	cfg := wireConfig
	if setup.trusted {
		cfg = "trusted_proxies: [127.0.0.1]\n" + cfg
	}
	px := proxytest.StartWith(t, newStore(t), siteURL+setup.suffix, cfg, opts)
	host := px.Server.Listener.Addr().String()
	fmt.Fprintf(out, "######## %s\n", setup.name)
	for i, c := range wireCases {
		id := fmt.Sprint("w", i)
		req := wireRequest(c, id)
		fmt.Fprintf(out, "==== %s\n-- sender sent:\n%s\n", c.name, req)
		first := rawExchange(t, host, req)
		mu.Lock()
		site := got[id]
		mu.Unlock()
		site = strings.ReplaceAll(site, host, "PROXY")
		fmt.Fprintf(out, "-- site read:\n%s\n-- sender read:\n%s\n-- log: %s\n", site, first, decisionLine(t, px, id))
		again := rawExchange(t, host, req)
		fmt.Fprintf(out, "-- sender read again:\n%s\n", again)
	}
}

func wireRequest(c wireCase, id string) string {
	var b strings.Builder
	target := c.path
	if c.query != "" {
		target += "?" + c.query
	}
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: shop.example\r\nX-Event-Id: %s\r\n%s", target, id, c.header)
	if !strings.Contains(c.header, "Connection:") {
		b.WriteString("Connection: close\r\n")
	}
	if c.chunk {
		fmt.Fprintf(&b, "Transfer-Encoding: chunked\r\nTrailer: X-Req-Sum\r\n\r\n%x\r\n%s\r\n0\r\nX-Req-Sum: s\r\n\r\n", len(c.body), c.body)
	} else {
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(c.body), c.body)
	}
	return b.String()
}

var (
	dateLine = regexp.MustCompile(`(?m)^Date: .*\r\n`)
	loopback = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)
)

// rawExchange writes req on a new connection to the proxy and reads
// until the proxy closes it (every request says Connection: close), the
// Date line left out.
func rawExchange(t *testing.T, host, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	return dateLine.ReplaceAllString(string(b), "")
}

// decisionLine is the decision logged for event id, its times left out.
func decisionLine(t *testing.T, px *proxytest.Instance, id string) string {
	t.Helper()
	for range 100 {
		for _, line := range strings.Split(px.Logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) != nil || m["key"] != id || m["outcome"] == nil {
				continue
			}
			for _, k := range []string{"time", "duration_ms", "upstream_ms"} {
				delete(m, k)
			}
			b, _ := json.Marshal(m)
			return string(b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "(none)"
}

// A site that answers a webhook 101 Switching Protocols had the request:
// the outcome is ambiguous (trap 31), never "unreachable" (which frees the
// claim as if the handler never ran), and hookonce closes its connection
// to the site rather than leave it open. ReverseProxy released the claim
// as unreachable for an http:// site (and ambiguous for an https:// one),
// and left the connection open.
func TestSwitchingProtocolsIsAmbiguous(t *testing.T) {
	closed := make(chan bool, 4)
	execs := &earlyCounter{}
	addr := rawEarlySite(t, func(c net.Conn, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		execs.add(req.Header.Get("X-Event-Id"))
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		closed <- err == io.EOF
	})
	store := newStore(t)
	px := proxytest.Start(t, store, "http://"+addr, earlyConfig+"    ambiguous: hold\n")
	got := postEvent(t, px.Server, "sw1", `{"id":"sw1"}`)
	if got.Status != http.StatusBadGateway || !strings.Contains(string(got.Body), "may have run") {
		t.Fatalf("answer %d %s, want 502: the handler may have run", got.Status, got.Body)
	}
	if rec, err := get(t, store, "shop", "sw1"); err != nil || rec.State != dedupe.StateUnknown {
		t.Fatalf("record %+v %v, want held as unknown", rec, err)
	}
	if !<-closed {
		t.Error("hookonce left its connection to the site open after the 101")
	}
	if n := execs.get("sw1"); n != 1 {
		t.Errorf("site ran %d times, want 1", n)
	}
}
