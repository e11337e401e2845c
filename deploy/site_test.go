package deploy_test

// A Bitrix shop on nginx + php-fpm, for real: the front nginx runs
// nginx/hookonce.conf (with hookonce-webhook.conf), hookonce runs in this
// process, and the server it forwards to runs nginx/hookonce-site.conf in
// front of php-fpm (internal/testkit/sitetest). Executions are counted at PHP.

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe/sqlite"
	"github.com/hookonce/hookonce/internal/testkit/sitetest"
	"github.com/hookonce/hookonce/probe"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// The shop's webhook handlers and pages. Each handler records the id it
// read (sitetest_id) and answers 200.
var shopScripts = map[string]string{
	// Stripe: signed, the event id in the JSON body.
	"bitrix/tools/stripe.php": `<?php
$event = json_decode(file_get_contents('php://input'), true);
$id = sitetest_id((string)($event['id'] ?? ''));
header('Content-Type: application/json');
echo json_encode(['received' => true, 'event' => $id]);
`,
	// A home-grown handler: unsigned, the event id in a header.
	"api/webhooks/x.php": `<?php
$id = sitetest_id($_SERVER['HTTP_X_EVENT_ID'] ?? '');
header('Content-Type: application/json');
echo json_encode(['order' => 'created', 'event' => $id]);
`,
	// A Bitrix payment handler for a provider that does not sign its
	// notifications (YooKassa's HTTP notifications): the address they come
	// from is the only proof of origin. 127.0.0.2 stands for the
	// provider's network here; 185.71.76.1 is one of YooKassa's.
	"bitrix/tools/sale_ps_result.php": `<?php
$n = json_decode(file_get_contents('php://input'), true);
sitetest_id((string)($n['object']['id'] ?? ''));
if (!in_array($_SERVER['REMOTE_ADDR'], ['127.0.0.2', '185.71.76.1'], true)) {
    http_response_code(403);
    echo "notification from {$_SERVER['REMOTE_ADDR']} refused\n";
    exit;
}
echo "OK from {$_SERVER['REMOTE_ADDR']}\n";
`,
	// Bitrix's router: every URL that is no file lands here (@bitrix).
	"bitrix/urlrewrite.php": `<?php
if (rtrim(parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH), '/') !== '/webhooks/payment') {
    http_response_code(404);
    exit;
}
$n = json_decode(file_get_contents('php://input'), true);
$id = sitetest_id((string)($n['id'] ?? ''));
header('Content-Type: application/json');
echo json_encode(['order' => 'created', 'event' => $id]);
`,
	"catalog/index.php": `<?php echo "catalog\n";`,
}

const stripeSecret = "whsec_site_test_secret"

// shopConfig is hookonce.yaml for the shop, nginx trusted.
const shopConfig = `
trusted_proxies: [127.0.0.1]
senders:
  - name: stripe
    preset: stripe
    match: { path: /bitrix/tools/stripe.php }
    signature: { secret_env: SITE_TEST_STRIPE_SECRET }
  - name: x
    match: { path: /api/webhooks/x.php }
    key: [ { header: X-Event-Id } ]
  - name: yookassa
    match: { path: /bitrix/tools/sale_ps_result.php }
    key: [ { body: object.id } ]
  - name: payments
    match: { path: /webhooks/payment }
    key: [ { body: id } ]
`

var shopPaths = []string{"/bitrix/tools/stripe.php", "/api/webhooks/x.php", "/bitrix/tools/sale_ps_result.php", "/webhooks/payment"}

// shop is the whole stack.
type shop struct {
	site  *sitetest.Site      // nginx (hookonce-site.conf) + php-fpm
	ho    *proxytest.Instance // hookonce, upstream: site
	front *sitetest.Nginx     // nginx (hookonce.conf), the senders' way in
}

// mustReplace replaces old in text, failing when text has none: the
// shipped file changed under the test.
func mustReplace(t *testing.T, name, text, old, new string) string {
	t.Helper()
	if !strings.Contains(text, old) {
		t.Fatalf("%s has no %q any more", name, old)
	}
	return strings.ReplaceAll(text, old, new)
}

// webhookLocation is the location the snippet has for a sender path.
func webhookLocation(path string) string {
	return "location ~ ^" + regexp.QuoteMeta(path) + "(/|$) {\n        include hookonce-webhook.conf;\n    }"
}

var reWebhookLocation = regexp.MustCompile(`location ~ \^(\S+)\(/\|\$\) \{\s*include hookonce-webhook\.conf;\s*\}`)

// frontConf is nginx/hookonce.conf with the test's addresses and one
// webhook location per path, in the snippet's own form and place; nil
// paths keep the file's own locations.
func frontConf(t *testing.T, listen, hookonce, root, fastcgi string, paths []string) string {
	t.Helper()
	const name = "nginx/hookonce.conf"
	text := string(readFile(t, name))
	locs := reWebhookLocation.FindAllStringIndex(text, -1)
	if len(locs) == 0 {
		t.Fatalf("%s has no webhook locations", name)
	}
	if paths != nil {
		var gen []string
		for _, p := range paths {
			gen = append(gen, webhookLocation(p))
		}
		text = text[:locs[0][0]] + strings.Join(gen, "\n    ") + text[locs[len(locs)-1][1]:]
	}
	text = mustReplace(t, name, text, "listen 80;", "listen "+listen+";")
	text = mustReplace(t, name, text, "server 127.0.0.1:8080;", "server "+hookonce+";")
	text = mustReplace(t, name, text, "root /home/bitrix/www;", "root "+root+";")
	return mustReplace(t, name, text, "unix:/run/php/php8.2-fpm.sock", fastcgi)
}

// siteConf is nginx/hookonce-site.conf with the test's addresses.
func siteConf(t *testing.T, c sitetest.Conf) string {
	t.Helper()
	const name = "nginx/hookonce-site.conf"
	text := string(readFile(t, name))
	text = mustReplace(t, name, text, "listen 127.0.0.1:8000 ", "listen "+c.Listen+" ")
	text = mustReplace(t, name, text, "root /home/bitrix/www;", "root "+c.Root+";")
	return mustReplace(t, name, text, "unix:/run/php/php8.2-fpm.sock", c.FastCGI)
}

func startShop(t *testing.T) *shop {
	t.Helper()
	return startStack(t, shopScripts, shopConfig, shopPaths)
}

// startStack is the shop's stack with other scripts, hookonce.yaml and
// webhook locations (one per sender path) on the front; nil paths keep
// the shipped front's own locations.
func startStack(t *testing.T, scripts map[string]string, config string, paths []string) *shop {
	t.Helper()
	t.Setenv("SITE_TEST_STRIPE_SECRET", stripeSecret)
	s := &shop{}
	s.site = sitetest.Start(t, sitetest.Options{
		Scripts: scripts,
		Server:  func(c sitetest.Conf) string { return siteConf(t, c) },
	})
	s.ho = startHookonce(t, s.site.URL, config)
	s.front = sitetest.StartNginx(t, sitetest.NginxOptions{
		HTTP: func(listen string) string {
			return frontConf(t, listen, strings.TrimPrefix(s.ho.URL, "http://"), s.site.Root, s.site.FastCGI, paths)
		},
		Files: map[string]string{"hookonce-webhook.conf": string(readFile(t, "nginx/hookonce-webhook.conf"))},
	})
	return s
}

// startHookonce runs hookonce (proxytest, on a fresh SQLite store) in
// front of upstream with config; its log is printed if the test fails.
func startHookonce(t *testing.T, upstream, config string) *proxytest.Instance {
	t.Helper()
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hookonce.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	ho := proxytest.Start(t, store, upstream, config)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hookonce log:\n%s", ho.Logs.String())
		}
	})
	return ho
}

// runs returns the PHP runs that read id.
func (s *shop) runs(t *testing.T, id string) []sitetest.Run { return runsOf(t, s.site, id) }

func runsOf(t *testing.T, site *sitetest.Site, id string) []sitetest.Run {
	t.Helper()
	var out []sitetest.Run
	for _, r := range site.Runs(t) {
		if r.ID == id {
			out = append(out, r)
		}
	}
	return out
}

type reply struct {
	status int
	header http.Header
	body   string
}

func (r reply) replayed() bool { return r.header.Get(proxy.ReplayHeader) == "true" }

// send writes one request to addr from the local address from, with the
// request target exactly as given (no cleaning, no escaping: the
// spellings under test), header as name, value pairs, and reads the answer.
// A body goes as JSON and the request with Connection: close unless header
// names its own Content-Type or Connection.
func send(t *testing.T, addr, from, method, target, body string, header ...string) reply {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", strings.TrimPrefix(addr, "http://"))
	if err != nil {
		t.Fatalf("connect to %s from %s: %v", addr, from, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	given := func(name string) bool {
		for i := 0; i+1 < len(header); i += 2 {
			if strings.EqualFold(header[i], name) {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: shop.example.com\r\n", method, target)
	if !given("Connection") {
		b.WriteString("Connection: close\r\n")
	}
	if body != "" || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		if !given("Content-Type") {
			b.WriteString("Content-Type: application/json\r\n")
		}
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	for i := 0; i+1 < len(header); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", header[i], header[i+1])
	}
	b.WriteString("\r\n" + body)
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", method, target, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(rb)}
}

// spellings are request targets that nginx (merge_slashes on, Debian's
// PHP location) and PHP run as the script at path: the path itself, then
// the same script spelled with doubled slashes, dot segments, PATH_INFO,
// %2F, %2E and other escapes, and a query.
func spellings(path string) []string {
	first, rest, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/") // "api", "webhooks/x.php"
	slash := strings.LastIndexByte(path, '/')
	dir, file := path[:slash], path[slash+1:] // "/api/webhooks", "x.php"
	dot := strings.LastIndexByte(file, '.')
	name, ext := file[:dot], file[dot+1:] // "x", "php"
	return []string{
		path,
		"/" + path,                        // //api/webhooks/x.php
		"/" + first + "/./" + rest,        // /api/./webhooks/x.php
		"/" + first + "//" + rest,         // /api//webhooks/x.php
		"/" + first + "/x/../" + rest,     // /api/x/../webhooks/x.php
		path + "/",                        // /api/webhooks/x.php/
		path + "/anything",                // PATH_INFO
		path + "/y.php/z",                 // Debian splits at the first .php/
		"/" + first + "%2F" + rest,        // /api%2Fwebhooks/x.php
		dir + "%2f" + file,                // /api/webhooks%2fx.php
		dir + "/" + name + "%2e" + ext,    // /api/webhooks/x%2ephp
		"/" + first + "/%2E/" + rest,      // /api/%2E/webhooks/x.php
		"/" + first + "/x/%2e%2e/" + rest, // /api/x/%2e%2e/webhooks/x.php
		dir + "/%" + strconv.FormatInt(int64(file[0]), 16) + file[1:], // /api/webhooks/%78.php
		path + "%2Fanything", // PATH_INFO, escaped
		path + "?page=1",
	}
}

func signStripe(ts int64, body string) string {
	m := hmac.New(sha256.New, []byte(stripeSecret))
	fmt.Fprintf(m, "%d.%s", ts, body)
	return fmt.Sprintf("t=%d,v1=%s", ts, hex.EncodeToString(m.Sum(nil)))
}

// TestWebhookSpellingsRunOnce sends every spelling of two webhook scripts
// through the front nginx, and straight to hookonce, and counts the runs
// at PHP: one event on all spellings runs once; an unsigned Stripe event
// runs on none; no other method runs the script.
func TestWebhookSpellingsRunOnce(t *testing.T) {
	s := startShop(t)
	const stripePath, xPath = "/bitrix/tools/stripe.php", "/api/webhooks/x.php"

	// Without hookonce, every spelling runs the script: each is a way
	// around a sender rule that matched one spelling.
	t.Run("EverySpellingRunsTheScript", func(t *testing.T) {
		for _, path := range []string{stripePath, xPath} {
			for i, sp := range spellings(path) {
				id := fmt.Sprintf("bare-%s-%d", path, i)
				r := send(t, s.site.URL, "127.0.0.1", "POST", sp, fmt.Sprintf(`{"id":%q}`, id), "X-Event-Id", id)
				runs := s.runs(t, id)
				if r.status != 200 || len(runs) != 1 || runs[0].Script != path {
					t.Errorf("POST %s at the site: %d, runs %+v; want the script run once", sp, r.status, runs)
				}
			}
		}
	})

	runSpellingChecks(t, s.site, s.front.URL, s.ho.URL)
}

// runSpellingChecks sends every spelling of the stripe and x webhook
// scripts through front and straight to hookonce, and counts the runs at
// PHP.
func runSpellingChecks(t *testing.T, site *sitetest.Site, front, hookonce string) {
	const stripePath, xPath = "/bitrix/tools/stripe.php", "/api/webhooks/x.php"
	runs := func(t *testing.T, id string) []sitetest.Run { return runsOf(t, site, id) }
	for _, via := range []struct{ name, addr string }{{"ThroughNginx", front}, {"StraightToHookonce", hookonce}} {
		t.Run(via.name, func(t *testing.T) {
			t.Run("OneEventAllSpellingsOneRun", func(t *testing.T) {
				id := "evt-x-" + via.name
				body := `{"amount":100}`
				for i, sp := range spellings(xPath) {
					r := send(t, via.addr, "127.0.0.1", "POST", sp, body, "X-Event-Id", id)
					if r.status != 200 || r.replayed() != (i > 0) {
						t.Errorf("POST %s: %d replayed=%v %s; want 200, replayed after the first", sp, r.status, r.replayed(), r.body)
					}
				}
				runs := runs(t, id)
				if len(runs) != 1 {
					t.Fatalf("%d runs at PHP, want 1: %+v", len(runs), runs)
				}
				if runs[0].IdempotencyKey != "x:"+id {
					t.Errorf("Idempotency-Key at PHP = %q", runs[0].IdempotencyKey)
				}
			})
			t.Run("SignedStripeEventOneRun", func(t *testing.T) {
				id := "evt_signed_" + via.name
				body := fmt.Sprintf(`{"id":%q,"type":"payment_intent.succeeded"}`, id)
				sig := signStripe(time.Now().Unix(), body)
				for i, sp := range spellings(stripePath) {
					r := send(t, via.addr, "127.0.0.1", "POST", sp, body, "Stripe-Signature", sig)
					if r.status != 200 || r.replayed() != (i > 0) {
						t.Errorf("POST %s: %d replayed=%v %s", sp, r.status, r.replayed(), r.body)
					}
				}
				if n := len(runs(t, id)); n != 1 {
					t.Fatalf("%d runs at PHP, want 1", n)
				}
			})
			t.Run("UnsignedStripeEventNoRun", func(t *testing.T) {
				id := "evt_unsigned_" + via.name
				body := fmt.Sprintf(`{"id":%q,"type":"payment_intent.succeeded"}`, id)
				for _, sp := range spellings(stripePath) {
					if r := send(t, via.addr, "127.0.0.1", "POST", sp, body); r.status != http.StatusUnauthorized {
						t.Errorf("unsigned POST %s: %d %s, want 401", sp, r.status, r.body)
					}
				}
				if n := len(runs(t, id)); n != 0 {
					t.Fatalf("%d runs at PHP, want 0", n)
				}
			})
			t.Run("OtherMethodsNoRun", func(t *testing.T) {
				id := "evt-method-" + via.name
				body := fmt.Sprintf(`{"id":%q}`, id)
				for _, path := range []string{xPath, stripePath} {
					for _, sp := range spellings(path) {
						for _, m := range []string{"PUT", "PATCH", "GET"} {
							b := body
							if m == "GET" {
								b = ""
							}
							if r := send(t, via.addr, "127.0.0.1", m, sp, b, "X-Event-Id", id); r.status != http.StatusMethodNotAllowed {
								t.Errorf("%s %s: %d %s, want 405", m, sp, r.status, r.body)
							}
						}
					}
				}
				if n := len(runs(t, id)); n != 0 {
					t.Fatalf("%d runs at PHP, want 0", n)
				}
			})
		})
	}
}

// TestSenderAddressReachesPHP: the address PHP sees is the sender's, as
// before hookonce, whichever way the sender came in; what a client claims
// in X-Real-IP and its kin never becomes REMOTE_ADDR.
func TestSenderAddressReachesPHP(t *testing.T) {
	s := startShop(t)
	runAddressChecks(t, s.site, s.front.URL, s.ho.URL)

	t.Run("SiteServerTrustsOnlyLoopback", func(t *testing.T) {
		const id = "pay-bare-forged"
		r := send(t, s.site.URL, "127.0.0.3", "POST", "/bitrix/tools/sale_ps_result.php",
			`{"object":{"id":"`+id+`"}}`, "X-Real-IP", "185.71.76.1")
		if runs := s.runs(t, id); r.status != 403 || len(runs) != 1 || runs[0].RemoteAddr != "127.0.0.3" {
			t.Fatalf("%d %s, runs %+v; want PHP to see 127.0.0.3 and refuse", r.status, r.body, runs)
		}
	})
}

// runAddressChecks sends payment notifications (the sale_ps_result.php
// handler, which trusts 127.0.0.2) from 127.0.0.2, the provider, and from
// 127.0.0.3 claiming to be 185.71.76.1, through front and straight to
// hookonce, and reads REMOTE_ADDR at PHP from the journal: it must be the
// connecting client's, every time.
func runAddressChecks(t *testing.T, site *sitetest.Site, front, hookonce string) {
	const path = "/bitrix/tools/sale_ps_result.php"
	forged := []string{"X-Real-IP", "185.71.76.1", "X-Forwarded-For", "185.71.76.1",
		"True-Client-IP", "185.71.76.1", "Forwarded", "for=185.71.76.1"}
	cases := []struct {
		name, addr, from, target string
		header                   []string
		status                   int // PHP's answer; 0: anything but 200, and PHP need not run
	}{
		{"ProviderThroughNginx", front, "127.0.0.2", path, nil, 200},
		{"ProviderStraightToHookonce", hookonce, "127.0.0.2", path, nil, 200},
		{"ForgedThroughNginx", front, "127.0.0.3", path, forged, 403},
		{"ForgedStraightToHookonce", hookonce, "127.0.0.3", path, forged, 403},
		// A header smuggled in through the URL: nginx must pass the path
		// escaped, or X-Real-IP: 185.71.76.1 becomes a header line of its
		// own, ahead of the one nginx sets.
		{"HeaderInPathThroughNginx", front, "127.0.0.3",
			path + "/%20HTTP/1.1%0D%0AX-Real-IP:%20185.71.76.1%0D%0AX-Pad:%20x", nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := "pay-" + tc.name
			before := len(site.Runs(t))
			r := send(t, tc.addr, tc.from, "POST", tc.target, `{"event":"payment.succeeded","object":{"id":"`+id+`"}}`, tc.header...)
			var mine []sitetest.Run
			for _, run := range site.Runs(t)[before:] {
				if run.RemoteAddr != tc.from {
					t.Errorf("PHP saw REMOTE_ADDR %s, want the client's %s: %+v", run.RemoteAddr, tc.from, run)
				}
				if run.ID == id {
					mine = append(mine, run)
				}
			}
			if tc.status == 0 {
				if r.status == 200 || len(mine) > 1 {
					t.Errorf("%d %q, runs %+v; want it refused", r.status, r.body, mine)
				}
				return
			}
			if r.status != tc.status || len(mine) != 1 {
				t.Errorf("%d %q, runs %+v; want %d from one run", r.status, r.body, mine, tc.status)
			}
		})
	}
}

// TestShopBehindNginx: pages skip hookonce, and the acceptance probe
// passes through the front nginx for an unsigned sender (served by Bitrix's
// router) and a signed one, each probe event running once at PHP.
func TestShopBehindNginx(t *testing.T) {
	s := startShop(t)
	t.Run("PagesSkipHookonce", func(t *testing.T) {
		r := send(t, s.front.URL, "127.0.0.2", "GET", "/catalog/index.php?id=7", "")
		if r.status != 200 || r.body != "catalog\n" {
			t.Fatalf("page: %d %q", r.status, r.body)
		}
		if log := s.site.AccessLog(); strings.Contains(log, "/catalog/") {
			t.Errorf("the page went through hookonce to the site server:\n%s", log)
		}
	})
	for _, tc := range []struct {
		sender, path, scheme, secret string
	}{
		{"payments", "/webhooks/payment", "", ""},
		{"stripe", "/bitrix/tools/stripe.php", "stripe", stripeSecret},
	} {
		t.Run("Probe/"+tc.sender, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := probe.Run(ctx, probe.Config{Target: s.front.URL, Path: tc.path, Sender: tc.sender,
				Scheme: tc.scheme, Secret: tc.secret, Parallel: 6})
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			res.Print(&b)
			t.Logf("probe through nginx:\n%s", b.String())
			if !res.Passed() {
				t.Fatal("probe failed through nginx")
			}
			for _, k := range res.Keys {
				id := k
				if tc.scheme == "stripe" {
					// The stripe preset's key is the event id and the
					// api_version the probe renders it in; PHP read the id.
					id, _, _ = strings.Cut(k, ":")
				}
				runs := s.runs(t, id)
				if len(runs) != 1 {
					t.Errorf("%s ran %d times at PHP", k, len(runs))
					continue
				}
				if runs[0].RemoteAddr != "127.0.0.1" || runs[0].IdempotencyKey != tc.sender+":"+k {
					t.Errorf("%s at PHP: %+v", k, runs[0])
				}
			}
		})
	}
}
