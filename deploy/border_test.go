package deploy_test

// The border between a sender's delivery and "not ours" (issue 41),
// counted at real nginx + php-fpm: a copy of a genuine delivery that the
// site runs as the sender's handler either is the sender's to hookonce
// (deduplicated) or is refused; it is never handed on as no sender's.
// Each test first sends its variants straight to the site: that they run
// the handler there is what hookonce forwarding them untouched (the old
// reading) would have cost.

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/internal/testkit/providersign"
	"github.com/hookonce/hookonce/internal/testkit/sitetest"
)

// bitrixRequestScript picks Robokassa as 1C-Bitrix does: by
// $request->get('SHP_HANDLER'), which is array_merge($_GET, $_POST)
// (Bitrix\Main\HttpRequest), never a cookie; checks the signature; and
// records the payment it applied.
const bitrixRequestScript = `<?php
$req = array_merge($_GET, $_POST);
if (($req['SHP_HANDLER'] ?? '') !== 'ROBOXCHANGE') { http_response_code(404); exit; }
$shp = [];
foreach ($req as $k => $v) { if (stripos($k, 'shp_') === 0) { $shp[$k] = $v; } }
ksort($shp);
$parts = [$req['OutSum'], $req['InvId'], 'robo-pass-2'];
foreach ($shp as $k => $v) { $parts[] = "$k=$v"; }
if (strtoupper(md5(implode(':', $parts))) !== strtoupper($req['SignatureValue'] ?? '')) { http_response_code(400); echo "bad sign\n"; exit; }
sitetest_id('robokassa-' . $req['InvId']);
echo 'OK' . $req['InvId'];
`

func roboForm(inv string) string {
	v := url.Values{"OutSum": {"1500.00"}, "InvId": {inv}, "SHP_HANDLER": {"ROBOXCHANGE"}}
	v.Set("SignatureValue", providersign.Robokassa(md5.New, "robo-pass-2", v))
	return v.Encode()
}

// TestCookieCannotTurnDedupeOff: the README's Bitrix config, a captured
// Robokassa notification resent with Cookie: SHP_HANDLER=1 (or InvId)
// beside the genuine one: payment 1002 is applied once. With the README's
// site.request: get_post hookonce reads the request as Bitrix does (the
// copy is a duplicate); without it the name is unreadable (400).
func TestCookieCannotTurnDedupeOff(t *testing.T) {
	t.Setenv("ROBOKASSA_PASSWORD2", "robo-pass-2")
	t.Setenv("TBANK_PASSWORD", "tbank-pass")
	const path = "/bitrix/tools/sale_ps_result.php"
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	site := sitetest.Start(t, sitetest.Options{Scripts: map[string]string{"bitrix/tools/sale_ps_result.php": bitrixRequestScript}})
	cookies := []string{"SHP_HANDLER=1", "InvId=9; SHP_HANDLER=x"}

	// Control: the site runs the handler for each cookie copy, as for
	// the genuine delivery (Bitrix does not read cookies).
	for i, c := range append([]string{""}, cookies...) {
		h := form
		if c != "" {
			h = append(h, "Cookie", c)
		}
		if r := send(t, site.URL, "127.0.0.1", "POST", path, roboForm("1001"), h...); r.status != 200 || r.body != "OK1001" {
			t.Fatalf("control %d straight to the site: %d %q", i, r.status, r.body)
		}
	}
	if n := len(runsOf(t, site, "robokassa-1001")); n != 3 {
		t.Fatalf("control: the site ran payment 1001 %d times for 3 copies, want 3 (so a copy hookonce handed on would apply it again)", n)
	}

	readme := quickstartConfig(t)
	if !strings.Contains(readme, "request: get_post") {
		t.Fatal("the README's config no longer says site.request: get_post")
	}
	withoutGetPost := strings.Replace(readme, "site: { request: get_post }", "", 1)
	for _, tc := range []struct {
		name, config, inv string
		copyStatus        int
	}{
		{"README", readme, "1002", 200},
		{"DefaultReading", withoutGetPost, "1003", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ho := startHookonce(t, site.URL, tc.config)
			body := roboForm(tc.inv)
			// The copy first, then the genuine delivery, then the copies again.
			order := append(append(append([]string{}, cookies...), ""), cookies...)
			for _, c := range order {
				h := form
				if c != "" {
					h = append(h, "Cookie", c)
				}
				r := send(t, ho.URL, "127.0.0.1", "POST", path, body, h...)
				switch {
				case c == "" && r.status != 200:
					t.Fatalf("genuine delivery: %d %q", r.status, r.body)
				case c != "" && r.status != tc.copyStatus:
					t.Fatalf("copy with Cookie %s: %d %q, want %d", c, r.status, r.body, tc.copyStatus)
				case c != "" && r.status == 400 && !strings.Contains(r.body, "SHP_HANDLER") && !strings.Contains(r.body, "cookie"):
					t.Errorf("the 400 does not name the reason: %q", r.body)
				}
			}
			if n := len(runsOf(t, site, "robokassa-"+tc.inv)); n != 1 {
				t.Fatalf("payment %s applied %d times, want once", tc.inv, n)
			}
		})
	}
}

// kindScript is a home-grown handler that dispatches on the X-Kind
// header (CGI's HTTP_X_KIND: the last of the spellings nginx passes with
// underscores_in_headers on) and, like the site in the issue, trusts
// hookonce to have checked the signature.
const kindScript = `<?php
$json = json_decode(file_get_contents('php://input'), true);
if (($_SERVER['HTTP_X_KIND'] ?? '') === 'pay') { sitetest_id('pay-' . ($json['id'] ?? '')); echo "paid\n"; exit; }
if (($json['kind'] ?? '') === 'refund') { sitetest_id('refund-' . ($json['id'] ?? '')); echo "refunded\n"; exit; }
echo "nothing\n";
`

const kindSiteConfig = `
senders:
  - name: pay
    match:
      path: /hooks/kind.php
      when: [ { header: X-Kind, equals: pay } ]
    key: [ { body: id } ]
    signature: { scheme: hmac-sha256, header: X-Signature, encoding: hex, secret_env: SITE_TEST_CGI_SECRET }
  - name: refund
    match:
      path: /hooks/kind.php
      when: [ { body: kind, equals: refund } ]
    key: [ { body: id } ]
    signature: { scheme: hmac-sha256, header: X-Signature, encoding: hex, secret_env: SITE_TEST_CGI_SECRET }
`

// TestHeaderConditionFailsClosed: forged, unsigned requests whose X-Kind
// PHP reads as "pay" (sent twice, or X-Kind beside X_Kind) run the pay
// handler at the site, and through hookonce get 400 and run nothing; a
// genuine signed payment whose unsigned X-Kind was changed is refused too;
// the genuine delivery runs once.
func TestHeaderConditionFailsClosed(t *testing.T) {
	t.Setenv("SITE_TEST_CGI_SECRET", cgiSecret)
	const path = "/hooks/kind.php"
	site := sitetest.Start(t, sitetest.Options{Scripts: map[string]string{"hooks/kind.php": kindScript}, Directives: "underscores_in_headers on;"})
	forged := [][]string{
		{"X-Kind", "pay", "X-Kind", "pay"},
		{"X-Kind", "other", "X_Kind", "pay"},
	}
	for i, h := range forged {
		if r := send(t, site.URL, "127.0.0.1", "POST", path, `{"id":"control"}`, h...); r.body != "paid\n" {
			t.Fatalf("control %d straight to the site: %d %q; want the pay handler to run", i, r.status, r.body)
		}
	}

	ho := startHookonce(t, site.URL, kindSiteConfig)
	body := `{"id":"p7"}`
	sig := hmacHex(cgiSecret, body)
	for i, h := range forged {
		r := send(t, ho.URL, "127.0.0.1", "POST", path, `{"id":"forged"}`, h...)
		if r.status != 400 || !strings.Contains(r.body, "X-Kind") {
			t.Errorf("forged %d: %d %q; want 400 naming header X-Kind", i, r.status, r.body)
		}
	}
	if n := len(runsOf(t, site, "pay-forged")); n != 0 {
		t.Fatalf("a forged request ran the pay handler %d times", n)
	}
	for i, h := range [][]string{{"X-Kind", "pay"}, {"X-Kind", "PAY"}, {"X-Kind", "pay", "X_Kind", "pay"}, nil, {"X-Kind", "pay"}} {
		r := send(t, ho.URL, "127.0.0.1", "POST", path, body, append([]string{"X-Signature", sig}, h...)...)
		want := 400
		if i == 0 || i == 4 {
			want = 200
		}
		if r.status != want {
			t.Errorf("signed delivery %d (%v): %d %q, want %d", i, h, r.status, r.body, want)
		}
	}
	if n := len(runsOf(t, site, "pay-p7")); n != 1 {
		t.Fatalf("payment p7 ran %d times, want once", n)
	}
	if n := len(ho.Logs.String()); n == 0 || !strings.Contains(ho.Logs.String(), "could not be") && !strings.Contains(ho.Logs.String(), "cannot be read") {
		t.Errorf("the log does not say the value could not be read:\n%s", ho.Logs.String())
	}
}

// wooScript is WordPress's index.php as far as a gateway callback goes:
// WP::parse_request's public query var wc-api (the form before the query,
// a mismatch refused, then the /wc-api/ rewrite endpoint), then
// WC_API::handle_api_requests (sanitize_key of $_GET['wc-api']) and the
// Robokassa plugin's woocommerce_api_robokassa_result, which checks the
// signature and applies the payment. Every other request is a page.
const wooScript = `<?php
$qv = '';
if (isset($_GET['wc-api'], $_POST['wc-api']) && $_GET['wc-api'] !== $_POST['wc-api']) { http_response_code(400); echo "A variable mismatch has been detected."; exit; }
if (isset($_POST['wc-api'])) { $qv = $_POST['wc-api']; }
elseif (isset($_GET['wc-api'])) { $qv = $_GET['wc-api']; }
elseif (preg_match('#^(?:.+?/)?wc-api(?:/(.*))?$#', trim(urldecode(parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH)), '/'), $m)) { $qv = $m[1] ?? ''; }
if (!empty($_GET['wc-api'])) { $qv = is_scalar($_GET['wc-api']) ? preg_replace('/[^a-z0-9_\-]/', '', strtolower($_GET['wc-api'])) : ''; }
if (!empty($qv)) {
    $api = strtolower(trim(strip_tags(is_scalar($qv) ? (string)$qv : '')));
    if ($api !== 'robokassa_result') { http_response_code(400); echo '-1'; exit; }
    $req = $_REQUEST;
    $parts = [$req['OutSum'] ?? '', $req['InvId'] ?? '', 'robo-pass-2'];
    if (strtoupper(md5(implode(':', $parts))) !== strtoupper($req['SignatureValue'] ?? '')) { http_response_code(400); echo "bad sign\n"; exit; }
    sitetest_id('robokassa-' . $req['InvId']);
    echo 'OK' . $req['InvId'];
    exit;
}
sitetest_id('page');
echo "page\n";
`

// TestWooCommerceCallbackVariantsRunOnce: docs/woocommerce.md's config
// and nginx front in front of a WordPress-like site. Every spelling and
// URL WooCommerce runs the Robokassa handler for is sent a copy of one
// signed callback: the payment is applied once in all; pages still work.
func TestWooCommerceCallbackVariantsRunOnce(t *testing.T) {
	t.Setenv("ROBOKASSA_PASSWORD2", "robo-pass-2")
	t.Setenv("MYGATEWAY_SECRET", "x")
	t.Setenv("WC_WEBHOOK_SECRET", "x")
	doc := string(readFile(t, "../docs/woocommerce.md"))
	config := fenced(t, doc, "```yaml\nsite:")
	front := fenced(t, doc, "```nginx\n")
	site := sitetest.Start(t, sitetest.Options{Scripts: map[string]string{"index.php": wooScript},
		Directives: "location / { try_files $uri $uri/ /index.php?$args; }"})
	ho := startHookonce(t, site.URL, config)
	fr := sitetest.StartNginx(t, sitetest.NginxOptions{
		HTTP: func(listen string) string {
			text := mustReplace(t, "woocommerce.md", front, "listen 443 ssl;", "listen "+listen+";")
			text = mustReplace(t, "woocommerce.md", text, "root /var/www/shop;", "root "+site.Root+";")
			return "upstream hookonce { server " + strings.TrimPrefix(ho.URL, "http://") + "; }\n" + text
		},
		Files: map[string]string{"hookonce-webhook.conf": string(readFile(t, "nginx/hookonce-webhook.conf"))},
	})

	sign := func(inv string) url.Values {
		v := url.Values{"OutSum": {"10.00"}, "InvId": {inv}}
		v.Set("SignatureValue", providersign.Robokassa(md5.New, "robo-pass-2", v))
		return v
	}
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	type variant struct{ method, target, body string }
	variants := func(inv string) []variant {
		q := sign(inv).Encode()
		return []variant{
			{"POST", "/?wc-api=robokassa_result", q},
			{"POST", "/?wc-api=robokassa_result%21", q},
			{"POST", "/?wc-api=robokassa_result%20", q},
			{"POST", "/?wc-api=robokassa_result%0a", q},
			{"POST", "/?wc-api=ROBOKASSA_RESULT", q},
			{"POST", "/?wc%2Dapi=robokassa_result", q},
			{"POST", "/shop/?wc-api=robokassa_result", q},
			{"POST", "/shop/product/x/?wc-api=robokassa_result", q},
			{"POST", "/index.php?wc-api=robokassa_result", q},
			{"GET", "/?wc-api=robokassa_result&" + q, ""},
			{"POST", "/", "wc-api=robokassa_result&" + q},
			{"POST", "/shop/", "wc-api=Robokassa_Result&" + q},
			{"GET", "/wc-api/robokassa_result/?" + q, ""},
			{"GET", "/shop/wc-api/robokassa_result?" + q, ""},
		}
	}

	// Control: straight to the site, each variant runs the handler.
	for _, v := range variants("501") {
		if r := send(t, site.URL, "127.0.0.1", v.method, v.target, v.body, form...); r.status != 200 || r.body != "OK501" {
			t.Fatalf("control %s %s straight to the site: %d %q; want the handler to run", v.method, v.target, r.status, r.body)
		}
	}
	if n := len(runsOf(t, site, "robokassa-501")); n != len(variants("501")) {
		t.Fatalf("control: %d runs for %d variants", n, len(variants("501")))
	}

	for i, v := range variants("502") {
		// The first runs the handler; a copy is the same event: its stored
		// answer, or 422 where the URL (part of the payload hash) differs.
		r := send(t, fr.URL, "127.0.0.2", v.method, v.target, v.body, form...)
		ok := (i == 0 && r.status == 200 && r.body == "OK502" && !r.replayed()) ||
			(i > 0 && (r.status == 422 || r.status == 200 && r.body == "OK502" && r.replayed()))
		if !ok {
			t.Errorf("%s %s through the front: %d %q replayed=%v", v.method, v.target, r.status, r.body, r.replayed())
		}
	}
	if n := len(runsOf(t, site, "robokassa-502")); n != 1 {
		t.Fatalf("the callback ran the handler %d times in all, want once", n)
	}
	// The signed callback under a method no sender accepts: PHP fills
	// $_GET for a PUT too, so the site runs the handler for it; the path
	// forwards every method (unmatched: pass), and hookonce refuses this
	// one as a signed delivery of robokassa rather than hand it on.
	put := "/index.php?wc-api=robokassa_result&" + sign("504").Encode()
	if r := send(t, site.URL, "127.0.0.1", "PUT", put, ""); r.status != 200 || r.body != "OK504" {
		t.Fatalf("control PUT straight to the site: %d %q; want the handler to run", r.status, r.body)
	}
	if r := send(t, fr.URL, "127.0.0.2", "PUT", "/index.php?wc-api=robokassa_result&"+sign("502").Encode(), ""); r.status != 400 || !strings.Contains(r.body, "robokassa") {
		t.Errorf("PUT of the signed callback: %d %q, want 400 naming robokassa", r.status, r.body)
	}
	if n := len(runsOf(t, site, "robokassa-502")); n != 1 {
		t.Fatalf("after the PUT, the callback ran the handler %d times in all, want once", n)
	}
	// Pages are the shop's, through hookonce untouched, in any method.
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "OPTIONS"} {
		if r := send(t, fr.URL, "127.0.0.2", m, "/shop/?p=1", "", form...); r.status != 200 || r.replayed() {
			t.Errorf("%s a page: %d %q", m, r.status, r.body)
		}
	}
	// A wc-api POST value WooCommerce would clean otherwise than hookonce
	// models is refused, never handed on as the shop's page.
	if r := send(t, fr.URL, "127.0.0.2", "POST", "/", "wc-api=robokassa_result%21&"+sign("503").Encode(), form...); r.status != 400 {
		t.Errorf("a wc-api form value with a stray character: %d %q, want 400", r.status, r.body)
	}
	if n := len(runsOf(t, site, "robokassa-503")); n != 0 {
		t.Errorf("the refused callback ran %d times", n)
	}
}

// fenced returns the code block of doc that starts with start (its
// opening fence included), dedented by its fence's indentation.
func fenced(t *testing.T, doc, start string) string {
	t.Helper()
	i := strings.Index(doc, start)
	if i < 0 {
		t.Fatalf("no block starting %q", start)
	}
	lineStart := strings.LastIndexByte(doc[:i], '\n') + 1
	indent := doc[lineStart:i]
	body := doc[i+strings.Index(start, "\n")+1:]
	end := strings.Index(body, indent+"```")
	if end < 0 {
		t.Fatalf("block %q does not end", start)
	}
	var out []string
	for _, line := range strings.Split(body[:end], "\n") {
		out = append(out, strings.TrimPrefix(line, indent))
	}
	return strings.Join(out, "\n")
}

func hmacHex(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}
