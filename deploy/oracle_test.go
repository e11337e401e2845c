package deploy_test

// The differential oracle: hookonce's reading of a request against the
// site's, by machine. Generated requests (oracle_gen_test.go) go to
// hookonce two ways — straight, and through the shipped front nginx
// (nginx/hookonce.conf) — and hookonce forwards them to the shipped site
// server (nginx/hookonce-site.conf) in front of real php-fpm, where every
// script is one reporter: it writes down the script that ran, $_GET,
// $_POST, $_REQUEST, $_FILES' names, the HTTP_* headers and REMOTE_ADDR.
// In front of the proxy, the test records what hookonce judged for the
// same request (Contract.Locate and Contract.Inspect, as the proxy and
// `hookonce check --request` call them). Every sender runs in shadow mode
// with unmatched: pass, so everything hookonce does not refuse reaches PHP.
//
// For each request the two readings must agree:
//   - a script a sender owns ran only for a request hookonce gave that
//     sender's route (else a bypass), and a route's rules were applied
//     only to requests that ran its script;
//   - on a sender's route: the query, form and request fields, the
//     headers the senders read, the JSON id, and the client address
//     (REMOTE_ADDR and every address header PHP sees) are equal;
//   - or hookonce refused the request (a path no site runs, a body it
//     cannot read as PHP would): those are counted, by reason.
//
// ./test.sh runs a fixed seed; HOOKONCE_ORACLE_N and HOOKONCE_ORACLE_SEED
// run a longer or another one. oracle_variants_test.go runs the same
// comparison against the other site setups shops run (nginx settings,
// Apache with mod_php or php-fpm, PHP without php.ini, php -S).

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe/sqlite"
	"github.com/hookonce/hookonce/internal/testkit/sitetest"
	"github.com/hookonce/hookonce/proxy"
)

// oracleReporter is every script of the oracle site. Names and values are
// hex so that any byte survives.
const oracleReporter = `<?php
function oracle_flat($a, $p, &$out) {
    foreach ($a as $k => $v) {
        $n = $p === null ? (string)$k : $p . '[' . $k . ']';
        if (is_array($v)) { oracle_flat($v, $n, $out); } else { $out[bin2hex($n)] = bin2hex((string)$v); }
    }
}
$g = []; oracle_flat($_GET, null, $g);
$p = []; oracle_flat($_POST, null, $p);
$r = []; oracle_flat($_REQUEST, null, $r);
$f = []; foreach ($_FILES as $k => $v) { $f[] = bin2hex((string)$k); }
$h = [];
foreach ($_SERVER as $k => $v) {
    if (strncmp($k, 'HTTP_', 5) === 0) { $h[substr($k, 5)] = bin2hex((string)$v); }
}
$j = json_decode(file_get_contents('php://input'), true);
$jid = null;
if (is_array($j) && isset($j['object']) && is_array($j['object']) && isset($j['object']['id']) && (is_string($j['object']['id']) || is_int($j['object']['id']) || is_float($j['object']['id']))) {
    $jid = (string)$j['object']['id'];
}
$rep = [
    'script' => substr($_SERVER['SCRIPT_FILENAME'], strlen($_SERVER['DOCUMENT_ROOT']) + 1),
    'method' => $_SERVER['REQUEST_METHOD'],
    'content_type' => $_SERVER['CONTENT_TYPE'] ?? null,
    'remote_addr' => $_SERVER['REMOTE_ADDR'],
    'get' => (object)$g, 'post' => (object)$p, 'request' => (object)$r, 'files' => $f,
    'headers' => (object)$h, 'json_id' => $jid,
];
$id = preg_replace('/[^a-z0-9-]/', '', $_SERVER['HTTP_X_ORACLE_ID'] ?? 'none');
file_put_contents(dirname($_SERVER['DOCUMENT_ROOT']) . '/data/oracle-' . $id . '.json', json_encode($rep));
echo "reported\n";
`

// phpReport is what the reporter wrote (hex decoded).
type phpReport struct {
	Script      string            `json:"script"`
	Method      string            `json:"method"`
	ContentType *string           `json:"content_type"`
	RemoteAddr  string            `json:"remote_addr"`
	Get         map[string]string `json:"get"`
	Post        map[string]string `json:"post"`
	Request     map[string]string `json:"request"`
	Files       []string          `json:"files"`
	Headers     map[string]string `json:"headers"`
	JSONID      *string           `json:"json_id"`
}

func unhexMap(t *testing.T, m map[string]string, hexKeys bool) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		kb, err1 := []byte(k), error(nil)
		if hexKeys {
			kb, err1 = hex.DecodeString(k)
		}
		vb, err2 := hex.DecodeString(v)
		if err1 != nil || err2 != nil {
			t.Errorf("reporter: bad hex %q=%q", k, v)
		}
		out[string(kb)] = string(vb)
	}
	return out
}

// judged is what hookonce made of one request.
type judged struct {
	refused string // why hookonce refuses it whatever the mode; "" when it does not
	route   string // the route's path; "" for none
	in      contract.Inspection
	header  http.Header // as judged (hop-by-hop removed)
	// alone: the same bytes went to the site itself, not through
	// hookonce's forward (see oracleVariant): the site's own address
	// handling is not hookonce's to match.
	alone bool
	// unjudged: the route does not take the method, and hookonce passes
	// the request on as it came, judging no key (unmatched).
	unjudged bool
	// rewritten: hookonce's forward does not carry the request as it
	// came (a header named in Connection is dropped, a header spelled
	// with "_" goes under the name it was judged by), so the site alone
	// reading the original bytes is not what it reads in production.
	rewritten bool
}

// oracle is the stack: the PHP site, hookonce and the front nginx.
type oracle struct {
	t     *testing.T
	site  *sitetest.Site
	data  string // where the reporter writes (the site's Data)
	ho    *httptest.Server
	judge *httptest.Server // judges and answers 204, forwards nothing
	front *sitetest.Nginx
	c     *contract.Contract
	// noRealIP: the site server cannot take REMOTE_ADDR from hookonce's
	// X-Real-IP (php -S): REMOTE_ADDR is not compared.
	noRealIP bool
	config   string // added to oracleConfig (a site: block)
	// documented says why a disagreement is a property of the site setup
	// that docs/deployment.md tells the operator about ("" when it is
	// not): counted and shown, not failed.
	documented func(c oracleCase, d string) string

	mu     sync.Mutex
	judged map[string]*judged // by X-Oracle-Id
}

func startOracle(t *testing.T) *oracle {
	t.Helper()
	scripts := oracleScripts()
	o := &oracle{t: t, judged: map[string]*judged{}}
	o.site = sitetest.Start(t, sitetest.Options{
		Scripts: scripts,
		Server:  func(c sitetest.Conf) string { return siteConf(t, c) },
	})
	o.data = o.site.Data
	o.startHookonce(t, o.site.URL)
	o.front = sitetest.StartNginx(t, sitetest.NginxOptions{
		HTTP: func(listen string) string {
			return frontConf(t, listen, strings.TrimPrefix(o.ho.URL, "http://"), o.site.Root, o.site.FastCGI, oracleFrontPaths)
		},
		Files: map[string]string{"hookonce-webhook.conf": string(readFile(t, "nginx/hookonce-webhook.conf"))},
	})
	return o
}

// oracleScripts are the oracle site's scripts: the reporter everywhere.
func oracleScripts() map[string]string {
	scripts := map[string]string{}
	for s := range oracleOwned {
		scripts[s] = oracleReporter
	}
	for _, s := range oracleDecoys {
		scripts[s] = oracleReporter
	}
	return scripts
}

// startHookonce runs hookonce with oracleConfig in front of upstream,
// recording what it judged for each request (o.ho), and a judge that
// records the same for a request and answers 204 without forwarding it
// (o.judge).
func (o *oracle) startHookonce(t *testing.T, upstream string) {
	t.Helper()
	c, err := contract.Parse([]byte(oracleConfig+o.config), "oracle.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o.c = c
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hookonce.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	u, _ := url.Parse(upstream)
	px, err := proxy.New(proxy.Options{Upstream: u, Contract: c, Store: store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	o.ho = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, c.MaxBody+1))
		o.record(r, body, false)
		r.Body = io.NopCloser(bytes.NewReader(body))
		px.ServeHTTP(w, r)
	}))
	o.judge = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, c.MaxBody+1))
		o.record(r, body, true)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() { o.ho.Close(); o.judge.Close(); _ = px.Close(context.Background()) })
}

// record judges a request as the proxy will, on a copy of it.
func (o *oracle) record(r *http.Request, body []byte, alone bool) {
	j := &judged{alone: alone, rewritten: forwardRewrites(r.Header)}
	path, rt, err := o.c.Locate(r.URL.EscapedPath())
	switch {
	case err != nil:
		j.refused = "path: " + err.Error()
	case rt != nil:
		j.route = rt.Path
		j.unjudged = !rt.AcceptsMethod(r.Method)
		cp := r.Clone(context.Background())
		cp.Header = r.Header.Clone()
		j.in = o.c.Inspect(rt, cp, path, body, time.Now())
		j.header = cp.Header
		if err := j.in.Request.Unreadable(); err != nil {
			j.refused = "unreadable body: " + err.Error()
		}
	}
	o.mu.Lock()
	o.judged[r.Header.Get("X-Oracle-Id")] = j
	o.mu.Unlock()
}

// forwardRewrites reports whether hookonce's forward changes h beyond the
// hop headers: a header named in Connection, or a name with "_".
func forwardRewrites(h http.Header) bool {
	for k := range h {
		if strings.Contains(k, "_") {
			return true
		}
	}
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" && !strings.EqualFold(f, "close") && !strings.EqualFold(f, "keep-alive") {
				return true
			}
		}
	}
	return false
}

// sendRaw writes c to addr exactly as generated and returns the status
// (0 when the connection closed without an answer).
func sendRaw(t *testing.T, addr string, c oracleCase, id string) int {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(c.from)}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(addr, "http://"))
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: shop.example.com\r\nConnection: %s\r\nX-Oracle-Id: %s\r\n",
		c.method, c.target, strings.Join(append([]string{"close"}, c.conn...), ", "), id)
	for _, h := range c.headers {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	switch {
	case c.chunks > 0:
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		body := c.body
		for i := c.chunks; len(body) > 0; i-- {
			n := len(body)
			if i > 1 {
				n = min(n, 1+len(c.body)/c.chunks)
			}
			fmt.Fprintf(&b, "%x\r\n%s\r\n", n, body[:n])
			body = body[n:]
		}
		b.WriteString("0\r\n\r\n")
	case c.body != "" || c.method != "GET":
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(c.body), c.body)
	default:
		b.WriteString("\r\n")
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return 0
	}
	buf := make([]byte, 64)
	n, _ := io.ReadAtLeast(conn, buf, 12)
	if n < 12 {
		return 0
	}
	status, _ := strconv.Atoi(string(buf[9:12]))
	_, _ = io.Copy(io.Discard, conn)
	return status
}

func (o *oracle) report(t *testing.T, id string) *phpReport {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(o.data, "oracle-"+id+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Error(err)
		return nil
	}
	var rep phpReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Errorf("report %s: %v", id, err)
		return nil
	}
	rep.Get, rep.Post, rep.Request = unhexMap(t, rep.Get, true), unhexMap(t, rep.Post, true), unhexMap(t, rep.Request, true)
	rep.Headers = unhexMap(t, rep.Headers, false)
	return &rep
}

// tally is the oracle's figures.
type tally struct {
	sent, ran, compared int
	refused             map[string]int
	disagree            []string
	// documented are disagreements the site setup causes and the docs
	// tell the operator about, by reason (oracle.documented).
	documented   map[string]int
	documentedEx []string
}

// compare checks one request's two readings and returns the
// disagreements (none when they agree).
func (o *oracle) compare(id string, rep *phpReport) []string {
	o.mu.Lock()
	j := o.judged[id]
	o.mu.Unlock()
	if rep == nil {
		return nil // no script ran: nothing to disagree about
	}
	// The file that ran, whatever spelling of its path the server kept
	// (merge_slashes off: SCRIPT_FILENAME has "//").
	rep.Script = strings.TrimPrefix(path.Clean("/"+rep.Script), "/")
	owner := oracleOwned[rep.Script]
	switch {
	case j == nil && strings.HasPrefix(id, "alone-"):
		return nil // hookonce's HTTP server refuses these bytes (400): nothing judged, nothing forwarded
	case j != nil && j.alone && (j.rewritten || j.refused != ""):
		return nil // counted: not what the site reads behind hookonce, or never reaches it
	case j == nil && owner != "":
		return []string{fmt.Sprintf("bypass: PHP ran %s (route %s) but the request never reached hookonce", rep.Script, owner)}
	case j == nil:
		return nil
	case strings.HasPrefix(j.refused, "unreadable"):
		return nil // refused in enforce mode (shadow mode forwards it): counted, not compared
	case j.refused != "" && owner != "":
		return []string{fmt.Sprintf("bypass: hookonce refuses it (%s), yet PHP ran %s", j.refused, rep.Script)}
	case j.refused != "":
		return nil
	case j.route != owner && owner != "":
		return []string{fmt.Sprintf("bypass: PHP ran %s (route %s), hookonce applied route %q", rep.Script, owner, j.route)}
	case j.route != owner && strings.HasSuffix(j.route, "*"):
		return nil // a prefix sender owns whatever runs below it, a router script included
	case j.route != owner:
		return []string{fmt.Sprintf("misattributed: PHP ran %s, hookonce applied route %s", rep.Script, j.route)}
	case owner == "":
		return nil
	}
	if j.unjudged {
		// Passed on as it came, nothing read: only where it ran and the
		// address are hookonce's.
		return o.compareAddr(j, rep, nil)
	}
	var out []string
	q := j.in.Request
	eq := func(what string, got map[string]string, err error, want map[string]string) {
		if err != nil {
			got = map[string]string{}
		}
		if len(got) == 0 && len(want) == 0 {
			return
		}
		if !mapsEqual(got, want) {
			out = append(out, fmt.Sprintf("%s: hookonce %s, PHP %s", what, showMap(got), showMap(want)))
		}
	}
	g, err := q.Fields(contract.FromQuery)
	eq("$_GET", g, err, rep.Get)
	f, err := q.Fields(contract.FromForm)
	eq("$_POST", f, err, rep.Post)
	// FromRequest is refused where $_REQUEST and Bitrix's array_merge
	// differ; elsewhere it must equal $_REQUEST.
	if rq, err := q.Fields(contract.FromRequest); err == nil {
		eq("$_REQUEST", rq, err, rep.Request)
	}
	if rep.Method != q.Method {
		out = append(out, fmt.Sprintf("method: hookonce %q, PHP %q", q.Method, rep.Method))
	}
	// Headers a key or a signature reads, under the name PHP reads them
	// by (every spelling CGI merges into it): one value judged is the
	// value PHP has; none judged, PHP has none. Two or more are judged
	// absent, whatever PHP keeps.
	for _, h := range oracleKeyHeaders {
		if j.unjudged {
			break
		}
		vals := q.Header.Values(h)
		php, ok := rep.Headers[strings.ToUpper(strings.ReplaceAll(h, "-", "_"))]
		switch {
		case len(vals) == 1 && (!ok || php != strings.TrimSpace(vals[0])):
			out = append(out, fmt.Sprintf("header %s: hookonce %q, PHP %q (present %v)", h, vals[0], php, ok))
		case len(vals) == 0 && ok:
			out = append(out, fmt.Sprintf("header %s: hookonce none, PHP %q", h, php))
		}
	}
	if cts := j.header.Values("Content-Type"); len(cts) == 1 && (rep.ContentType == nil || *rep.ContentType != cts[0]) {
		out = append(out, fmt.Sprintf("Content-Type: hookonce %q, PHP %v", cts[0], rep.ContentType))
	}
	if v, ok, err := q.Value(contract.FromBody, "object.id"); err == nil && ok && (rep.JSONID == nil || *rep.JSONID != v) {
		out = append(out, fmt.Sprintf("JSON object.id: hookonce %q, PHP %v", v, rep.JSONID))
	}
	return o.compareAddr(j, rep, out)
}

// compareAddr adds to out the disagreements about the client's address:
// PHP must see the one hookonce judged, and no address header of the
// sender's.
func (o *oracle) compareAddr(j *judged, rep *phpReport, out []string) []string {
	if j.alone {
		return out // the site's own address handling: not hookonce's (see judged.alone)
	}
	// One address: the one hookonce judged.
	client := j.in.Request.Client.String()
	if rep.RemoteAddr != client && !o.noRealIP {
		out = append(out, fmt.Sprintf("REMOTE_ADDR %s, hookonce judged %s", rep.RemoteAddr, client))
	}
	for k, v := range rep.Headers {
		switch {
		case k == "X_REAL_IP" && v != client:
			out = append(out, fmt.Sprintf("HTTP_X_REAL_IP %q, hookonce judged %s", v, client))
		case k == "X_FORWARDED_FOR" && strings.TrimSpace(strings.Split(v, ",")[0]) != client:
			out = append(out, fmt.Sprintf("HTTP_X_FORWARDED_FOR %q, hookonce judged %s", v, client))
		case k != "X_REAL_IP" && k != "X_FORWARDED_FOR" && isAddrEnv(k):
			out = append(out, fmt.Sprintf("HTTP_%s %q reached PHP", k, v))
		}
	}
	return out
}

func isAddrEnv(k string) bool {
	for _, h := range contract.ClientAddrHeaders {
		if strings.ToUpper(strings.ReplaceAll(h, "-", "_")) == k {
			return true
		}
	}
	return false
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func showMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 8 {
		return fmt.Sprintf("%d fields (%q … %q)", len(keys), keys[:4], keys[len(keys)-2:])
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: %q", k, m[k])
	}
	b.WriteByte('}')
	return b.String()
}

// oracleSeedCases are the holes a person found by hand: each must be in
// every run, whatever the seed.
func oracleSeedCases() []oracleCase {
	pad := make([]string, 0, 1000)
	for i := range 997 {
		pad = append(pad, fmt.Sprintf("f%d=%d", i, i))
	}
	robo := "OutSum=10&InvId=7&SHP_HANDLER=ROBOX"
	form := [2]string{"Content-Type", "application/x-www-form-urlencoded"}
	mp := func(ct, body string) []oracleCase {
		return []oracleCase{{method: "POST", target: "/hooks/pay.php", headers: [][2]string{{"Content-Type", ct}}, body: body}}
	}
	cases := []oracleCase{
		{method: "POST", target: "/webhooks/payment/index.php", headers: [][2]string{form}, body: "data[FIELDS][ID]=1"},
		{method: "POST", target: "/webhooks/payment/index.php/x", headers: [][2]string{form}, body: "data[FIELDS][ID]=1"},
		{method: "POST", target: "/webhooks//payment/./index.php", headers: [][2]string{form}, body: "data[FIELDS][ID]=1"},
		{method: "POST", target: "/webhooks/payment/%69ndex.php", headers: [][2]string{form}, body: "data[FIELDS][ID]=1"},
		{method: "POST", target: "/webhooks/payment/", headers: [][2]string{form}, body: "data[FIELDS][ID]=1"},
		{method: "POST", target: "/hooks/pay.php", headers: [][2]string{{"Content-Type", "application/x-www-form-urlencoded, text/plain"}}, body: robo},
		{method: "POST", target: "/hooks/pay.php", headers: [][2]string{{"Content-Type", "application/x-www-form-urlencoded ;charset=UTF-8"}}, body: robo},
		{method: "POST", target: "/hooks/pay.php", headers: [][2]string{form}, body: strings.Join(pad, "&") + "&&&&" + robo},
		{method: "POST", target: "/hooks/pay.php?InvId=7&SHP_HANDLER=ROBOX", headers: [][2]string{form}, body: strings.Join(pad, "&") + "&&InvId=8"},
		{method: "POST", target: "/hooks/pay.php", headers: [][2]string{form}, body: "a[ ]=1&a[ ]=2&" + robo},
		{method: "POST", target: "/hooks/pay.php", headers: [][2]string{form, {"X-Event-Id", "e1"}}, conn: []string{"Content-Type"}, body: robo},
		{method: "POST", target: "/webhooks/payment", headers: [][2]string{form, {"X-Event-Id", "e1"}}, conn: []string{"X-Event-Id"}, body: "data[FIELDS][ID]=1"},
	}
	cases = append(cases, mp("multipart/form-data; xboundary=AAA; boundary=BBB",
		"--AAA\r\nContent-Disposition: form-data; name=\"InvId\"\r\n\r\n1\r\n--AAA\r\nContent-Disposition: form-data; name=\"SHP_HANDLER\"\r\n\r\nROBOX\r\n--AAA--\r\n")...)
	cases = append(cases, mp("multipart/form-data; boundary=AAA; boundary=BBB",
		"--AAA\r\nContent-Disposition: form-data; name=\"InvId\"\r\n\r\n2\r\n--AAA\r\nContent-Disposition: form-data; name=\"SHP_HANDLER\"\r\n\r\nROBOX\r\n--AAA--\r\n")...)
	cases = append(cases, mp("multipart/form-data; boundary=AAA",
		"--AAA\r\nContent-Disposition: form-data; name=\"InvId\"; filename=\"\"\r\n\r\n3\r\n--AAA\r\nContent-Disposition: form-data; name=\"InvId\"\r\n\r\n4\r\n--AAA\r\nContent-Disposition: form-data; name=\"SHP_HANDLER\"\r\n\r\nROBOX\r\n--AAA--\r\n")...)
	cases = append(cases, mp("multipart/form-data; boundary=AAA",
		"--AAA\r\nContent-Disposition: form-data; name=\"InvId\"; filename*=UTF-8''x\r\n\r\n5\r\n--AAA\r\nContent-Disposition: attachment; name=\"x\"; name=\"SHP_HANDLER\"\r\n\r\nROBOX\r\n--AAA--\r\n")...)
	cases = append(cases, mp("multipart/form-data; boundary=AAA",
		"--AAA\r\nContent-Disposition: form-data; name=\"InvId\"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n=36\r\n--AAA\r\nContent-Disposition: form-data; name=\"SHP_HANDLER\"\r\n\r\nROBOX\r\n--AAA--\r\n")...)
	for _, h := range oracleAddrHeaders {
		cases = append(cases, oracleCase{method: "POST", target: "/bitrix/tools/sale_ps_result.php",
			headers: [][2]string{{"Content-Type", "application/json"}, {h, "185.71.76.1"}}, body: `{"object":{"id":"a1"}}`})
	}
	for i := range cases {
		cases[i].what = "seed case " + strconv.Itoa(i)
		if cases[i].from == "" {
			cases[i].from = []string{"127.0.0.3", "127.0.0.1"}[i%2]
		}
	}
	return cases
}

func oracleN(t *testing.T) (n int, seed uint64) {
	n, seed = 500, 19
	if testing.Short() {
		n = 100
	}
	if v := os.Getenv("HOOKONCE_ORACLE_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("HOOKONCE_ORACLE_N=%q: %v", v, err)
		}
	}
	if v := os.Getenv("HOOKONCE_ORACLE_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("HOOKONCE_ORACLE_SEED=%q: %v", v, err)
		}
	}
	return n, seed
}

// TestOracleHookonceReadsAsPHP is the differential oracle (see the top of
// this file). Its figures go to the test log and, with
// HOOKONCE_ORACLE_REPORT=file, to a file. oracle_variants_test.go runs
// the same comparison against the other site setups shops run.
func TestOracleHookonceReadsAsPHP(t *testing.T) {
	o := startOracle(t)
	n, seed := oracleN(t)
	cases := oracleCases(n, seed)
	var summary []string
	for _, way := range []struct{ name, addr string }{{"direct", o.ho.URL}, {"front", o.front.URL}} {
		tl := o.run(way.name, cases, func(c oracleCase, id string) { sendRaw(t, way.addr, c, id) })
		summary = append(summary, way.name+": "+tl.summary(seed))
		// An oracle that compared nothing would pass: the site must have
		// run for a good share of the requests, and many of them on a
		// sender's route (98 of 531 with seed 19).
		if tl.ran < tl.sent/4 || tl.compared < tl.sent/8 {
			t.Errorf("%s: %d of %d requests ran PHP and %d were compared on a sender's route: the oracle checked too little",
				way.name, tl.ran, tl.sent, tl.compared)
		}
		tl.fail(t, way.name)
	}
	t.Log("oracle: " + strings.Join(summary, "; "))
	if f := os.Getenv("HOOKONCE_ORACLE_REPORT"); f != "" {
		_ = os.WriteFile(f, []byte(strings.Join(summary, "\n")+"\n"), 0o644)
	}
}

// oracleCases are the seed cases and n generated ones.
func oracleCases(n int, seed uint64) []oracleCase {
	g := gen{r: rand.New(rand.NewPCG(seed, 0x6f7261636c65))}
	cases := oracleSeedCases()
	for i := range n {
		cases = append(cases, g.next(i))
	}
	return cases
}

// run sends every case the way send does (four at a time), with ids
// "<way>-<i>", and compares the two readings of each.
func (o *oracle) run(way string, cases []oracleCase, send func(c oracleCase, id string)) *tally {
	tl := &tally{refused: map[string]int{}, documented: map[string]int{}}
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, c := range cases {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			id := fmt.Sprintf("%s-%d", way, i)
			send(c, id)
			rep := o.report(o.t, id)
			d := o.compare(id, rep)
			mu.Lock()
			defer mu.Unlock()
			tl.sent++
			if rep != nil {
				tl.ran++
			}
			o.mu.Lock()
			j := o.judged[id]
			o.mu.Unlock()
			switch {
			case j == nil && strings.HasPrefix(id, "alone-"):
				tl.refused["hookonce's HTTP server: 400 (a space in the target, a bad escape)"]++
			case j != nil && j.alone && j.rewritten && j.refused == "":
				tl.refused["alone: rewritten by the forward"]++
			case j != nil && j.refused != "":
				tl.refused[strings.TrimPrefix(j.refused, "unreadable body: "+contract.ErrUnreadableBody.Error()+": ")]++
			case rep != nil && j != nil && j.route != "":
				tl.compared++
			}
			for _, x := range d {
				line := fmt.Sprintf("%s %s %s from %s [%s]: %s", c.method, c.target, id, c.from, c.what, x)
				if o.documented != nil {
					if why := o.documented(c, x); why != "" {
						tl.documented[why]++
						tl.documentedEx = append(tl.documentedEx, line)
						continue
					}
				}
				tl.disagree = append(tl.disagree, line)
			}
		}()
	}
	wg.Wait()
	slices.Sort(tl.disagree)
	return tl
}

func (tl *tally) summary(seed uint64) string {
	var refused []string
	for k, v := range tl.refused {
		refused = append(refused, fmt.Sprintf("%s: %d", k, v))
	}
	slices.Sort(refused)
	var documented []string
	for k, v := range tl.documented {
		documented = append(documented, fmt.Sprintf("%s: %d", k, v))
	}
	slices.Sort(documented)
	line := fmt.Sprintf("%d requests (seed %d), %d ran PHP, %d compared on a sender's route, %d disagreements, refused {%s}",
		tl.sent, seed, tl.ran, tl.compared, len(tl.disagree), strings.Join(refused, ", "))
	if len(documented) > 0 {
		line += fmt.Sprintf(", documented site properties {%s}", strings.Join(documented, ", "))
	}
	return line
}

// fail reports the disagreements (the first 40).
func (tl *tally) fail(t *testing.T, way string) {
	t.Helper()
	for i, d := range tl.disagree {
		if i == 40 {
			t.Errorf("%s: … and %d more", way, len(tl.disagree)-i)
			break
		}
		t.Errorf("%s: %s", way, d)
	}
}
