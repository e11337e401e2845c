package deploy_test

// hookonce judges the request the site gets: the headers a Connection list
// names are gone before the signature, key and conditions are read, and
// the addresses the site reads are the one hookonce judged. Each test
// reproduces a hole found by hand, counting runs at real PHP behind the
// shipped site server (nginx/hookonce-site.conf).

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/sitetest"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

var judgedScripts = map[string]string{
	// A Stripe handler that, like Stripe's SDK, refuses an unsigned event.
	"hooks/stripe.php": `<?php
$e = json_decode(file_get_contents('php://input'), true);
sitetest_id((string)($e['id'] ?? ''));
if (empty($_SERVER['HTTP_STRIPE_SIGNATURE'])) { http_response_code(400); echo "no signature\n"; exit; }
echo "ok\n";
`,
	// A form handler keyed on InvId.
	"hooks/form.php": `<?php
sitetest_id((string)($_POST['InvId'] ?? ''));
echo "OK{$_POST['InvId']}\n";
`,
	// A callback keyed on the query, as RBS's GET callbacks are.
	"hooks/q.php": `<?php
sitetest_id((string)($_GET['id'] ?? ''));
echo "OK\n";
`,
	// A Bitrix payment script several systems share, told apart by a field.
	"hooks/rk.php": `<?php
if (($_REQUEST['SHP_HANDLER'] ?? '') === 'ROBOX') { sitetest_id((string)($_REQUEST['InvId'] ?? '')); }
echo "OK" . ($_REQUEST['InvId'] ?? '') . "\n";
`,
	// Reports every address the site could take for the client's.
	"hooks/addr.php": `<?php
$e = json_decode(file_get_contents('php://input'), true);
sitetest_id((string)($e['id'] ?? ''));
$out = ['REMOTE_ADDR' => $_SERVER['REMOTE_ADDR']];
foreach ($_SERVER as $k => $v) {
    if (preg_match('/^HTTP_(.*(IP|ADDR|FORWARDED|FOR|FROM).*)$/', $k)) { $out[$k] = $v; }
}
header('Content-Type: application/json');
echo json_encode($out);
`,
}

const judgedConfig = `
trusted_proxies: [127.0.0.1]
senders:
  - name: stripe
    preset: stripe
    match: { path: /hooks/stripe.php }
    signature: { secret_env: SITE_TEST_STRIPE_SECRET }
  - name: form
    match: { path: /hooks/form.php }
    key: [ { form: InvId } ]
  - name: addr
    match: { path: /hooks/addr.php }
    key: [ { body: id } ]
  - name: q
    match: { method: GET, path: /hooks/q.php }
    key: [ { query: id } ]
  - name: robokassa
    match: { path: /hooks/rk.php, when: [ { request: SHP_HANDLER, equals: ROBOX } ] }
    key: [ { request: InvId } ]
paths:
  /hooks/rk.php: { unmatched: pass }
`

func startJudged(t *testing.T) (*sitetest.Site, *proxytest.Instance) {
	t.Helper()
	t.Setenv("SITE_TEST_STRIPE_SECRET", stripeSecret)
	site := sitetest.Start(t, sitetest.Options{Scripts: judgedScripts, Server: func(c sitetest.Conf) string { return siteConf(t, c) }})
	ho := startHookonce(t, site.URL, judgedConfig)
	return site, ho
}

// sendForm posts an urlencoded body from the local address from, with
// header as name, value pairs.
func sendForm(t *testing.T, addr, from, target, body string, header ...string) reply {
	t.Helper()
	return send(t, addr, from, "POST", target, body, append([]string{"Content-Type", "application/x-www-form-urlencoded"}, header...)...)
}

func TestConnectionCannotDropAJudgedHeader(t *testing.T) {
	site, ho := startJudged(t)

	t.Run("SignatureHeader", func(t *testing.T) {
		const id = "evt_conn_sig"
		body := `{"id":"` + id + `","type":"payment_intent.succeeded"}`
		sig := signStripe(time.Now().Unix(), body)
		// A copy of the genuine delivery whose Connection names the
		// signature header: the site would get it unsigned.
		r := send(t, ho.URL, "127.0.0.3", "POST", "/hooks/stripe.php", body, "Stripe-Signature", sig, "Connection", "close, Stripe-Signature")
		if r.status != 401 || len(runsOf(t, site, id)) != 0 {
			t.Fatalf("copy: %d %q, %d runs; want 401 and no run", r.status, r.body, len(runsOf(t, site, id)))
		}
		for i := range 3 {
			r := send(t, ho.URL, "127.0.0.3", "POST", "/hooks/stripe.php", body, "Stripe-Signature", sig)
			if r.status != 200 || r.body != "ok\n" {
				t.Fatalf("genuine delivery %d: %d %q", i, r.status, r.body)
			}
		}
		if n := len(runsOf(t, site, id)); n != 1 {
			t.Fatalf("the payment ran %d times, want once", n)
		}
	})
	t.Run("ContentType", func(t *testing.T) {
		const id = "4711"
		r := sendForm(t, ho.URL, "127.0.0.3", "/hooks/form.php", "InvId="+id, "Connection", "close, Content-Type")
		if r.status != 400 || len(runsOf(t, site, id)) != 0 {
			t.Fatalf("form whose Content-Type is hop-by-hop: %d %q, %d runs; want 400 (PHP sees no form) and no run",
				r.status, r.body, len(runsOf(t, site, id)))
		}
		for range 2 {
			if r := sendForm(t, ho.URL, "127.0.0.3", "/hooks/form.php", "InvId="+id); r.status != 200 || r.body != "OK"+id+"\n" {
				t.Fatalf("genuine: %d %q", r.status, r.body)
			}
		}
		if n := len(runsOf(t, site, id)); n != 1 {
			t.Fatalf("ran %d times, want once", n)
		}
	})
}

// PHP registers the 1001st field of an urlencoded body before it stops at
// max_input_vars; hookonce stopped at 1000. One notification padded with
// 998 fields put SHP_HANDLER where only PHP read it: hookonce found no
// sender (unmatched: pass) and every copy ran the payment.
func TestPaddedFormIsReadAsPHPReadsIt(t *testing.T) {
	site, ho := startJudged(t)
	pad := make([]string, 0, 1001)
	for i := range 998 {
		pad = append(pad, fmt.Sprintf("f%d=%d", i, i))
	}
	body := strings.Join(append(pad, "OutSum=10", "InvId=77", "SHP_HANDLER=ROBOX"), "&")
	for i := range 4 {
		if r := sendForm(t, ho.URL, "127.0.0.3", "/hooks/rk.php", body); r.status != 200 || r.body != "OK77\n" {
			t.Fatalf("copy %d: %d %q", i, r.status, r.body)
		}
	}
	if n := len(runsOf(t, site, "77")); n != 1 {
		t.Fatalf("the payment ran %d times, want once", n)
	}
}

// Go's ReverseProxy re-encodes a query net/url cannot parse, dropping the
// fields it cannot read: hookonce keyed "?id=7&id=%" on "%" (PHP reads
// the last id, a stray % kept) while the site got "?id=7". Two such
// spellings and the genuine callback ran event 7 three times.
func TestTheSiteGetsTheJudgedQuery(t *testing.T) {
	site, ho := startJudged(t)
	for _, q := range []string{"id=7&id=%", "id=7&id=%zz", "id=7"} {
		if r := send(t, ho.URL, "127.0.0.3", "GET", "/hooks/q.php?"+q, ""); r.status != 200 {
			t.Fatalf("?%s: %d %q", q, r.status, r.body)
		}
	}
	if n := len(runsOf(t, site, "7")); n != 1 {
		t.Fatalf("event 7 ran %d times, want once", n)
	}
	if n := len(runsOf(t, site, "%")) + len(runsOf(t, site, "%zz")); n != 2 {
		t.Fatalf("the site read the ids hookonce keyed on %d times, want 2", n)
	}
}

func TestOneAddressForTheSite(t *testing.T) {
	site, ho := startJudged(t)
	forged := []string{}
	for _, h := range oracleAddrHeaders {
		forged = append(forged, h, "185.71.76.1")
	}
	cases := []struct {
		name, from string
		header     []string
		want       string
	}{
		{"Untrusted", "127.0.0.3", forged, "127.0.0.3"},
		// From the site's own nginx: hookonce judges X-Forwarded-For, and
		// the site must see that address, not the client's X-Real-IP.
		{"TrustedProxy", "127.0.0.1", []string{"X-Forwarded-For", "198.51.100.7", "X-Real-IP", "203.0.113.9", "Client-IP", "203.0.113.9"}, "198.51.100.7"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("addr-%d", i)
			r := send(t, ho.URL, tc.from, "POST", "/hooks/addr.php", `{"id":"`+id+`"}`, tc.header...)
			var seen map[string]string
			if err := json.Unmarshal([]byte(r.body), &seen); err != nil || r.status != 200 {
				t.Fatalf("%d %q: %v", r.status, r.body, err)
			}
			for k, v := range seen {
				switch k {
				case "REMOTE_ADDR", "HTTP_X_REAL_IP":
					if v != tc.want {
						t.Errorf("%s = %q, want %s", k, v, tc.want)
					}
				case "HTTP_X_FORWARDED_FOR":
					if first, _, _ := strings.Cut(v, ","); strings.TrimSpace(first) != tc.want {
						t.Errorf("%s = %q, want it to start with %s", k, v, tc.want)
					}
				case "HTTP_X_FORWARDED_HOST", "HTTP_X_FORWARDED_PROTO":
				default:
					t.Errorf("%s = %q reached PHP", k, v)
				}
			}
			if n := len(runsOf(t, site, id)); n != 1 {
				t.Fatalf("%d runs", n)
			}
		})
	}
}
