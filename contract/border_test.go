package contract_test

// The border between a sender's delivery and "not ours" (issue 41): a
// request is handed to the site as no sender's only when hookonce could
// read every match.when value as the site reads it, and when it cannot be
// a signed sender's delivery changed on a part the signature does not
// cover. Everything else on a sender's path is a sender's or refused.

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/internal/testkit/providersign"
)

// judgeOn inspects one request on its route: the sender that takes it
// ("" for none) and why the route could not decide (nil when it could).
func judgeOn(t *testing.T, c *contract.Contract, method, target, body string, header ...string) (string, error) {
	t.Helper()
	r, err := http.NewRequest(method, "http://shop.example"+target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.RemoteAddr = "192.0.2.1:4000"
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	path, rt, err := c.Locate(r.URL.EscapedPath())
	if err != nil || rt == nil {
		t.Fatalf("%s %s: route %v, %v", method, target, rt, err)
	}
	in := c.Inspect(rt, r, path, []byte(body), time.Now())
	if in.BodyErr != nil {
		t.Fatalf("%s %s: body refused: %v", method, target, in.BodyErr)
	}
	name := ""
	if in.Choice.Sender != nil {
		name = in.Choice.Sender.Name
	}
	if in.Choice.Undecided != nil && name != "" {
		t.Fatalf("%s %s: sender %s and undecided %v", method, target, name, in.Choice.Undecided)
	}
	return name, in.Choice.Undecided
}

const kindSecret = "kind-s3cret"

const kindConfig = `
senders:
  - name: pay
    match:
      path: /hooks/kind.php
      when: [ { header: X-Kind, equals: pay } ]
    key: [ { body: id } ]
    signature: { scheme: hmac-sha256, header: X-Signature, encoding: hex, secret_env: BORDER_KIND_SECRET }
  - name: refund
    match:
      path: /hooks/kind.php
      when: [ { body: kind, equals: refund } ]
    key: [ { body: id } ]
    signature: { scheme: hmac-sha256, header: X-Signature, encoding: hex, secret_env: BORDER_KIND_SECRET }
`

func kindSig(body string) string {
	m := hmac.New(sha256.New, []byte(kindSecret))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

// TestHeaderConditionUnreadable: the header case. A forged,
// unsigned request whose X-Kind the site reads as "pay" (sent twice, or
// beside X_Kind, which CGI folds into one HTTP_X_KIND) is no longer "no
// sender's": the route cannot decide, and the request is refused.
func TestHeaderConditionUnreadable(t *testing.T) {
	t.Setenv("BORDER_KIND_SECRET", kindSecret)
	c, err := contract.Parse([]byte(kindConfig), "kind.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const p = "/hooks/kind.php"
	body := `{"id":"p1"}`
	for _, tc := range []struct {
		name    string
		header  []string
		sender  string
		refused error
	}{
		{"genuine", []string{"X-Kind", "pay", "X-Signature", kindSig(body)}, "pay", nil},
		{"forged, X-Kind twice", []string{"X-Kind", "pay", "X-Kind", "pay"}, "", contract.ErrConditionUnreadable},
		{"forged, X-Kind beside X_Kind", []string{"X-Kind", "other", "X_Kind", "pay"}, "", contract.ErrConditionUnreadable},
		{"forged, X_Kind alone is X-Kind", []string{"X_Kind", "pay"}, "pay", nil},
		{"forged, control byte", []string{"X-Kind", "p\tay"}, "", contract.ErrConditionUnreadable},
		{"a control byte in another value decides nothing", []string{"X-Kind", "oth\ter"}, "", nil},
		{"unsigned, other kind: not ours", []string{"X-Kind", "other"}, "", nil},
		{"no X-Kind, unsigned: not ours", nil, "", nil},
	} {
		got, undecided := judgeOn(t, c, "POST", p, body, tc.header...)
		if got != tc.sender || !errors.Is(undecided, tc.refused) || (tc.refused == nil) != (undecided == nil) {
			t.Errorf("%s: sender %q, undecided %v; want %q, %v", tc.name, got, undecided, tc.sender, tc.refused)
		}
	}

	// The old reading, kept as a record of the bypass: the first two
	// forged requests above were "no sender takes it", forwarded by the
	// path's default unmatched: pass, and the site's pay handler ran.
	rt := c.Route(p)
	if !rt.ForwardsUnmatched("POST") {
		t.Fatal("precondition: the path forwards what no sender takes (default pass)")
	}
}

// TestSignedDeliveryMissedOnAnUnsignedPart: a genuine signed delivery of
// "pay" whose X-Kind (outside the body signature) was changed or removed
// verifies as pay's: not "no sender's", refused. A genuine refund that
// "pay" misses on X-Kind but "refund" takes by signed content is taken; a
// signed delivery both miss on signed content is the site's.
func TestSignedDeliveryMissedOnAnUnsignedPart(t *testing.T) {
	t.Setenv("BORDER_KIND_SECRET", kindSecret)
	c, err := contract.Parse([]byte(kindConfig), "kind.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const p = "/hooks/kind.php"
	pay := `{"id":"p2"}`
	if got, err := judgeOn(t, c, "POST", p, pay, "X-Kind", "PAY", "X-Signature", kindSig(pay)); got != "" || !errors.Is(err, contract.ErrSignedUnmatched) {
		t.Errorf("signed pay with X-Kind changed: %q, %v; want refused as a signed delivery of pay", got, err)
	}
	if got, err := judgeOn(t, c, "POST", p, pay, "X-Signature", kindSig(pay)); got != "" || !errors.Is(err, contract.ErrSignedUnmatched) || !strings.Contains(err.Error(), "sender pay") {
		t.Errorf("signed pay without X-Kind: %q, %v; want refused naming pay", got, err)
	}
	refund := `{"id":"r1","kind":"refund"}`
	if got, err := judgeOn(t, c, "POST", p, refund, "X-Signature", kindSig(refund)); got != "refund" || err != nil {
		t.Errorf("signed refund: %q, %v; want refund", got, err)
	}
	// A method no sender accepts is refused by the route itself; a
	// signed body under GET on a path that takes any method is pay's copy.
	other := `{"id":"o1","kind":"chargeback"}`
	if got, err := judgeOn(t, c, "POST", p, other, "X-Signature", kindSig(other)); got != "" || !errors.Is(err, contract.ErrSignedUnmatched) {
		// pay misses it on X-Kind only (unsigned): it could be pay's.
		t.Errorf("signed chargeback without X-Kind: %q, %v; want refused (pay's X-Kind is unsigned)", got, err)
	}
}

// TestRequestNameACookieHolds: the README's Bitrix case. A genuine
// Robokassa notification with Cookie: SHP_HANDLER=1 was "no sender"
// (unreadable read as absent) and went past dedupe. Read as PHP may read
// $_REQUEST, the name is unreadable (refused); read as Bitrix's
// $request->get() (site.request: get_post), cookies are not read at all
// and the delivery is Robokassa's.
func TestRequestNameACookieHolds(t *testing.T) {
	t.Setenv("ROBOKASSA_PASSWORD2", "robo-pass-2")
	t.Setenv("TBANK_PASSWORD", "tbank-pass")
	const p = "/bitrix/tools/sale_ps_result.php"
	robo := url.Values{"OutSum": {"1500.00"}, "InvId": {"1002"}, "SHP_HANDLER": {"ROBOXCHANGE"}}
	robo.Set("SignatureValue", providersign.Robokassa(md5.New, "robo-pass-2", robo))
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	for _, site := range []struct {
		yaml    string
		cookie  string // what the cookie copy gets: a sender, or "" and refused
		refused error
	}{
		{"", "", contract.ErrConditionUnreadable},
		{"site: { request: get_post }\n", "robokassa", nil},
	} {
		c, err := contract.Parse([]byte(site.yaml+`
senders:
  - name: robokassa
    preset: robokassa
    match: { path: `+p+`, when: [ { request: SHP_HANDLER, equals: ROBOXCHANGE } ] }
    signature: { secret_env: ROBOKASSA_PASSWORD2 }
  - name: tbank
    preset: tbank
    match: { path: `+p+`, when: [ { body: TerminalKey, present: true } ] }
    signature: { secret_env: TBANK_PASSWORD }
`), "bitrix.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := judgeOn(t, c, "POST", p, robo.Encode(), form...); got != "robokassa" || err != nil {
			t.Errorf("%q genuine: %q, %v", site.yaml, got, err)
		}
		for _, cookie := range []string{"SHP_HANDLER=1", "InvId=9; SHP_HANDLER=ROBOXCHANGE"} {
			got, err := judgeOn(t, c, "POST", p, robo.Encode(), append(form, "Cookie", cookie)...)
			if got != site.cookie || !errors.Is(err, site.refused) || (site.refused == nil) != (err == nil) {
				t.Errorf("%q with Cookie %s: %q, %v; want %q, %v", site.yaml, cookie, got, err, site.cookie, site.refused)
			}
		}
		// A form condition on a JSON body: the site's $_POST is empty too.
		// Absent, never unreadable: T-Bank's JSON goes to tbank or, without
		// TerminalKey, to the site's own dispatch.
		if got, err := judgeOn(t, c, "POST", p, `{"PaymentId":"1"}`); got != "" || err != nil {
			t.Errorf("%q JSON without TerminalKey: %q, %v; want no sender, decided", site.yaml, got, err)
		}
	}
}

// TestWCAPIReadAsWooCommerceReadsIt: every spelling WooCommerce runs the
// robokassa_result handler for is the robokassa sender's, on any URL of
// the shop; what WooCommerce's cleaning is not modelled for is refused,
// and what runs no handler is the site's.
func TestWCAPIReadAsWooCommerceReadsIt(t *testing.T) {
	t.Setenv("ROBOKASSA_PASSWORD2", "x")
	c, err := contract.Parse([]byte(`
senders:
  - name: robokassa
    preset: robokassa
    match: { path: "/*", when: [ { wc_api: Robokassa_Result } ] }
    signature: { secret_env: ROBOKASSA_PASSWORD2 }
`), "wc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	taken := []struct{ method, target, body string }{
		{"GET", "/?wc-api=robokassa_result", ""},
		{"GET", "/?wc-api=ROBOKASSA_RESULT", ""},
		{"GET", "/?wc-api=robokassa_result%21", ""},
		{"GET", "/?wc-api=robokassa_result%20", ""},
		{"GET", "/?wc-api=robokassa_result%0a", ""},
		{"GET", "/?wc-api=robo%00kassa_result", ""},
		{"GET", "/?wc%2Dapi=robokassa_result", ""},
		{"GET", "/shop/?wc-api=robokassa_result", ""},
		{"GET", "/index.php?wc-api=robokassa_result", ""},
		{"GET", "/shop/product/x/?wc-api=robokassa_result&p=1", ""},
		{"POST", "/?wc-api=robokassa_result", "InvId=1"},
		{"POST", "/", "wc-api=robokassa_result&InvId=1"},
		{"POST", "/", "wc-api=Robokassa_Result&InvId=1"},
		{"GET", "/wc-api/robokassa_result/", ""},
		{"GET", "/shop/wc-api/ROBOKASSA_RESULT", ""},
		{"GET", "/index.php/wc-api/robokassa_result", ""},
	}
	for _, tc := range taken {
		h := []string(nil)
		if tc.method == "POST" {
			h = form
		}
		if got, err := judgeOn(t, c, tc.method, tc.target, tc.body, h...); got != "robokassa" || err != nil {
			t.Errorf("%s %s %q: %q, %v; want robokassa", tc.method, tc.target, tc.body, got, err)
		}
	}
	for _, tc := range []struct{ method, target, body string }{
		{"POST", "/", "wc-api=robokassa_result%21"},
		{"POST", "/", "wc-api[]=robokassa_result"},
		{"GET", "/wc-api/robokassa_result/x", ""},
		{"GET", "/wc-api/robokassa%20result", ""},
	} {
		if got, err := judgeOn(t, c, tc.method, tc.target, tc.body, form...); got != "" || !errors.Is(err, contract.ErrConditionUnreadable) {
			t.Errorf("%s %s %q: %q, %v; want refused as unreadable", tc.method, tc.target, tc.body, got, err)
		}
	}
	for _, tc := range []struct{ method, target, body string }{
		{"GET", "/", ""},
		{"GET", "/shop/", ""},
		{"GET", "/?wc-api=other_gateway", ""},
		{"GET", "/?wc-api=0", ""},
		{"GET", "/?wc-api[]=robokassa_result", ""},
		{"GET", "/?wc-api=&x=1", ""},
		{"GET", "/wc-apix/robokassa_result", ""},
		{"POST", "/?wc-api=x", "wc-api=robokassa_result"}, // GET's sanitize_key wins
	} {
		if got, err := judgeOn(t, c, tc.method, tc.target, tc.body, form...); got != "" || err != nil {
			t.Errorf("%s %s %q: %q, %v; want the site's (no handler of robokassa runs)", tc.method, tc.target, tc.body, got, err)
		}
	}
	if _, err := contract.Parse([]byte(`
senders:
  - name: robokassa
    preset: robokassa
    match: { path: "/*", when: [ { wc_api: "robokassa result" } ] }
    signature: { secret_env: ROBOKASSA_PASSWORD2 }
`), "wc.yaml"); err == nil || !strings.Contains(err.Error(), "a-z, 0-9, _ and -") {
		t.Errorf("a wc_api name WooCommerce would clean: %v", err)
	}
}

// TestQueryWCAPIWarns: a condition on the raw wc-api value is the
// recipe the old docs gave; check says what it misses.
func TestQueryWCAPIWarns(t *testing.T) {
	t.Setenv("ROBOKASSA_PASSWORD2", "x")
	c, err := contract.Parse([]byte(`
senders:
  - name: robokassa
    preset: robokassa
    match: { path: /, when: [ { query: wc-api, matches: "(?i)^robokassa_result$" } ] }
    signature: { secret_env: ROBOKASSA_PASSWORD2 }
`), "wc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(c.Warnings, "\n"), "{ wc_api: <name> }") {
		t.Errorf("no warning about query: wc-api: %q", c.Warnings)
	}
}

// TestSignedDeliveryUnderAnotherMethod: on a path that forwards every
// method (a written unmatched: pass), a signed Robokassa callback sent as
// PUT (PHP fills $_GET for it too) is judged, not forwarded unread, and
// refused as robokassa's; an unsigned PUT is the site's.
func TestSignedDeliveryUnderAnotherMethod(t *testing.T) {
	t.Setenv("ROBOKASSA_PASSWORD2", "robo-pass-2")
	c, err := contract.Parse([]byte(`
senders:
  - name: robokassa
    preset: robokassa
    match: { path: "/*", when: [ { wc_api: robokassa_result } ] }
    signature: { secret_env: ROBOKASSA_PASSWORD2 }
paths:
  /*: { unmatched: pass }
`), "wc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rt := c.Route("/")
	if !rt.JudgesUnaccepted("PUT") || rt.JudgesUnaccepted("GET") {
		t.Fatalf("JudgesUnaccepted PUT %v, GET %v; want true, false", rt.JudgesUnaccepted("PUT"), rt.JudgesUnaccepted("GET"))
	}
	q := url.Values{"OutSum": {"10.00"}, "InvId": {"7"}}
	q.Set("SignatureValue", providersign.Robokassa(md5.New, "robo-pass-2", q))
	if got, err := judgeOn(t, c, "PUT", "/?wc-api=robokassa_result&"+q.Encode(), ""); got != "" || !errors.Is(err, contract.ErrSignedUnmatched) || !strings.Contains(err.Error(), "method PUT") {
		t.Errorf("signed PUT: %q, %v; want refused as robokassa's under another method", got, err)
	}
	if got, err := judgeOn(t, c, "PUT", "/?wc-api=robokassa_result&InvId=7", ""); got != "" || err != nil {
		t.Errorf("unsigned PUT: %q, %v; want the site's", got, err)
	}
	// The default pass keeps its 405 for such methods: nothing to judge.
	d, err := contract.Parse([]byte(`
senders:
  - name: robokassa
    preset: robokassa
    match: { path: "/*", when: [ { wc_api: robokassa_result } ] }
    signature: { secret_env: ROBOKASSA_PASSWORD2 }
`), "wc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if d.Route("/").JudgesUnaccepted("PUT") {
		t.Error("a default pass judges PUT; it answers 405")
	}
}

func TestSiteRequestSetting(t *testing.T) {
	_, err := contract.Parse([]byte("site: { request: get_pots }\nsenders: []\n"), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), "x.yaml:1: field site.request") || !strings.Contains(err.Error(), `did you mean "get_post"`) {
		t.Errorf("a misspelt site.request: %v", err)
	}
	c, err := contract.Parse([]byte("site: { request: get_post }\nsenders: []\n"), "x.yaml")
	if err != nil || c.Site.Request != contract.SiteRequestGetPost {
		t.Errorf("site.request: get_post: %v, %+v", err, c)
	}
}

// TestArrayIsNotAbsent: a[]=… where a condition or a key reads a string
// is something the site sees (isset() holds), never "absent".
func TestArrayIsNotAbsent(t *testing.T) {
	c, err := contract.Parse([]byte(`
senders:
  - name: pay
    match: { path: /a.php, method: "GET,POST", when: [ { query: kind, matches: "^(pay)?$" } ] }
    key: [ { request: id } ]
    missing_key: pass
`), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := judgeOn(t, c, "GET", "/a.php?kind[]=pay&id=1", ""); got != "" || !errors.Is(err, contract.ErrConditionUnreadable) {
		t.Errorf("kind as an array: %q, %v; want unreadable", got, err)
	}
	r, _ := http.NewRequest("GET", "http://shop.example/a.php?kind=pay&id[x]=1", nil)
	r.RemoteAddr = "192.0.2.1:4000"
	path, rt, _ := c.Locate(r.URL.EscapedPath())
	in := c.Inspect(rt, r, path, nil, time.Now())
	if in.Choice.Sender == nil || !contract.KeyUnreadable(in.KeyErr) || in.Choice.Sender.Forwardable(in.KeyErr, in.Request) {
		t.Errorf("id as an array: sender %v, key error %v; want unreadable and not forwarded by missing_key: pass", in.Choice.Sender, in.KeyErr)
	}
}

// TestPresentIsDecidedForValuesThatAreThere: a present condition on a
// value that is there but not one string (a JSON boolean, an array, a
// header sent twice) is decided: present, as isset() sees it.
func TestPresentIsDecidedForValuesThatAreThere(t *testing.T) {
	c, err := contract.Parse([]byte(`
senders:
  - name: a
    match: { path: /p.php, when: [ { body: Success, present: true } ] }
    key: [ { body: id } ]
  - name: b
    match: { path: /p.php, when: [ { header: X-Flag, present: true } ] }
    key: [ { body: id } ]
  - name: c
    match: { path: /p.php, when: [ { query: f, present: false } ] }
    key: [ { body: id } ]
`), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target, body string
		header       []string
		want         string
	}{
		{"/p.php", `{"id":"1","Success":true}`, nil, "a"},
		{"/p.php", `{"id":"1","Success":{"x":1}}`, nil, "a"},
		{"/p.php", `{"id":"1"}`, []string{"X-Flag", "1", "X_Flag", "2"}, "b"},
		{"/p.php?f[]=1", `{"id":"1"}`, nil, ""},
		{"/p.php", `{"id":"1"}`, nil, "c"},
	} {
		if got, err := judgeOn(t, c, "POST", tc.target, tc.body, tc.header...); got != tc.want || err != nil {
			t.Errorf("%s %s %v: %q, %v; want %q", tc.target, tc.body, tc.header, got, err, tc.want)
		}
	}
}

func TestBitrixPathWithoutGetPostWarns(t *testing.T) {
	t.Setenv("ROBOKASSA_PASSWORD2", "x")
	const cfg = `
senders:
  - name: robokassa
    preset: robokassa
    match: { path: /bitrix/tools/sale_ps_result.php, when: [ { request: SHP_HANDLER, equals: ROBOXCHANGE } ] }
    signature: { secret_env: ROBOKASSA_PASSWORD2 }
`
	c, err := contract.Parse([]byte(cfg), "b.yaml")
	if err != nil || !strings.Contains(strings.Join(c.Warnings, "\n"), "site: { request: get_post }") {
		t.Errorf("no warning: %v %q", err, c.Warnings)
	}
	c, err = contract.Parse([]byte("site: { request: get_post }\n"+cfg), "b.yaml")
	if err != nil || strings.Contains(strings.Join(c.Warnings, "\n"), "get_post") {
		t.Errorf("a warning with get_post set: %v %q", err, c.Warnings)
	}
}
