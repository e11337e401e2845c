package contract_test

// What the differential oracle found across the site setups shops run
// (deploy/oracle_variants_test.go, #33), one unit test each, and the
// property behind the header rule over Inspect.

import (
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

// Inspect forwards what it judged: a header spelled with "_" goes to the
// site under the "-" name it was judged by, which nginx passes to PHP
// with underscores_in_headers off too (it drops X_Event_Id there, and the
// site read no id where hookonce keyed the event on one).
func TestInspectForwardsTheJudgedHeaderNames(t *testing.T) {
	c, err := contract.Parse([]byte(senderYAML("key: [{header: X-Event-Id}]")), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path, rt, err := c.Locate("/hook")
	if err != nil || rt == nil {
		t.Fatalf("Locate: %v %v", rt, err)
	}
	r, _ := http.NewRequest("POST", "http://shop.example/hook", strings.NewReader(`{}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header["X_event_id"] = []string{"u3"}
	r.Header["Content_type"] = []string{"text/plain"}
	in := c.Inspect(rt, r, path, []byte(`{}`), time.Now())
	if in.Key != "u3" || in.KeyErr != nil {
		t.Fatalf("key %q, %v; want u3", in.Key, in.KeyErr)
	}
	if got := r.Header.Values("X-Event-Id"); len(got) != 1 || got[0] != "u3" {
		t.Errorf("forwarded X-Event-Id = %q, want [u3]", got)
	}
	if _, ok := r.Header["X_event_id"]; ok {
		t.Errorf("the underscore spelling is still forwarded: %v", r.Header)
	}
	// Content_Type is not the header PHP reads the body by: it stays
	// what it was, and the real Content-Type is the only one.
	if got := r.Header.Values("Content-Type"); len(got) != 1 || got[0] != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
}

// The property: no two headers that PHP merges into one CGI name are
// judged apart. Over generated pairs of spellings of the key and the
// signature header (differing only in "-"/"_" and case) with different
// values, Inspect finds the key absent and the signature unverified;
// over one spelling alone, it reads what PHP reads.
func TestInspectHeadersPHPMergesJudgedAsOne(t *testing.T) {
	t.Setenv("HOOKONCE_TEST_SECRET", "s3cret")
	c, err := contract.Parse([]byte(senderYAML(
		"key: [{header: X-Event-Id}]",
		"signature: {scheme: hmac-sha256, header: X-Signature, encoding: hex, secret_env: HOOKONCE_TEST_SECRET}")), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path, rt, _ := c.Locate("/hook")
	body := `{"amount":10}`
	sig := hex.EncodeToString(mac([]byte("s3cret"), body))
	rnd := rand.New(rand.NewPCG(33, 2))
	spell := func(name string) string {
		b := []byte(name)
		for i, ch := range b {
			switch {
			case ch == '-' && rnd.IntN(2) == 0:
				b[i] = '_'
			case ch >= 'a' && ch <= 'z' && rnd.IntN(3) == 0:
				b[i] = ch - 'a' + 'A'
			case ch >= 'A' && ch <= 'Z' && rnd.IntN(3) == 0:
				b[i] = ch - 'A' + 'a'
			}
		}
		return string(b)
	}
	inspect := func(kv ...string) contract.Inspection {
		r, _ := http.NewRequest("POST", "http://shop.example/hook", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(kv); i += 2 {
			k := http.CanonicalHeaderKey(kv[i])
			r.Header[k] = append(r.Header[k], kv[i+1])
		}
		return c.Inspect(rt, r, path, []byte(body), time.Now())
	}
	for i := range 1000 {
		a, b := spell("X-Event-Id"), spell("X-Event-Id")
		in := inspect("X-Signature", sig, a, "id-a", b, "id-b")
		if in.SigErr != nil {
			t.Fatalf("case %d: signature: %v", i, in.SigErr)
		}
		if in.KeyErr == nil || !errors.Is(in.KeyErr, contract.ErrMissingKey) {
			t.Fatalf("case %d: %s: id-a and %s: id-b judged as key %q (%v); PHP reads one of them, so it is absent", i, a, b, in.Key, in.KeyErr)
		}
		sa, sb := spell("X-Signature"), spell("X-Signature")
		if in := inspect(sa, sig, sb, "junk", "X-Event-Id", "e1"); in.SigErr == nil {
			t.Fatalf("case %d: %s: valid and %s: junk verified; PHP reads one of them", i, sa, sb)
		}
		if in := inspect(sa, sig, a, "e2"); in.SigErr != nil || in.KeyErr != nil || in.Key != "e2" {
			t.Fatalf("case %d: %s and %s alone: key %q (%v), signature %v; PHP reads them as the headers", i, sa, a, in.Key, in.KeyErr, in.SigErr)
		}
	}
}

// A path whose meaning depends on whether the server merges slashes
// ("/a/b//../x": /a/x merged, /a/b/x on nginx with merge_slashes off and
// on Apache) has no one reading: refused.
func TestNormalizePathSlashesBeforeDotDot(t *testing.T) {
	for _, p := range []string{"/webhooks/payment/x//../..", "/a/b//../x", "/a//%2e%2e/x", "/a/b/%2F/../x"} {
		if got, err := contract.NormalizePath(p); !errors.Is(err, contract.ErrBadPath) {
			t.Errorf("NormalizePath(%q) = %q, %v; want ErrBadPath", p, got, err)
		}
	}
	for p, want := range map[string]string{"/a//b/../x": "/a/x", "//a/./b/": "/a/b", "/a/b/../x//": "/a/x", "/a//b": "/a/b"} {
		if got, err := contract.NormalizePath(p); err != nil || got != want {
			t.Errorf("NormalizePath(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
}

// Apache's MultiViews runs /hooks/pay.php for /hooks/pay and /hooks/pay/x
// (PATH_INFO /x), and a directory's index.php for /dir/index: on a site
// that says so (site.multiviews) a look-alike of the sender's path,
// refused, unless a sender names the path itself. Without it those paths
// run no sender's script and go to the site untouched, as without
// hookonce.
func TestLocateMultiViewsLookalikes(t *testing.T) {
	plain, err := contract.Parse([]byte(`
senders:
  - {name: pay, match: {path: /hooks/pay.php}, key: [{body: id}]}
  - {name: dir, match: {path: /webhooks/payment}, key: [{body: id}]}
`), "plain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkRoutes(t, plain, map[string]string{
		"/hooks/pay":              "",
		"/hooks/pay/x":            "",
		"/webhooks/payment/index": "",
		"/hooks/pay.php":          "pay",
	})
	c, err := contract.Parse([]byte(`
site: {multiviews: true}
senders:
  - {name: pay, match: {path: /hooks/pay.php}, key: [{body: id}]}
  - {name: dir, match: {path: /webhooks/payment}, key: [{body: id}]}
  - {name: own, match: {path: /bitrix/tools/x}, key: [{body: id}]}
  - {name: ownphp, match: {path: /bitrix/tools/x.php}, key: [{body: id}]}
`), "mv.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkRoutes(t, c, map[string]string{
		"/hooks/pay":                    "400",
		"/hooks/pay/x":                  "400",
		"/hooks//pay/index.php/x":       "400",
		"/hooks/pay.php":                "pay",
		"/hooks/pay.php/x":              "pay",
		"/hooks/payx":                   "",
		"/webhooks/payment/index":       "400",
		"/webhooks/payment/index/x.php": "400",
		"/webhooks/payment.php":         "",
		"/bitrix/tools/x":               "own", // named by a sender itself
		"/bitrix/tools/x.php":           "ownphp",
	})
}

// PHP without request_order (its built-in default: variables_order
// EGPCS) puts cookies in $_REQUEST over the query and the form: a
// request: name a cookie holds has no one reading, and neither has the
// whole of $_REQUEST when any cookie was sent.
func TestRequestSourceCookieNames(t *testing.T) {
	for _, cookie := range []string{"InvId=999", "a=1; InvId=999", " Inv.Id=9", "InvId[x]=1", "Inv%49d=1"} {
		name := "InvId"
		if strings.Contains(cookie, "Inv.Id") {
			name = "Inv_Id"
		}
		q := delivery(t, "POST", "/hook?"+name+"=7", "application/x-www-form-urlencoded", "SHP=1", "", "Cookie", cookie)
		if v, ok, err := q.Value(contract.FromRequest, name); err == nil {
			t.Errorf("Cookie %q: request %s = %q (%v), want it refused as ambiguous", cookie, name, v, ok)
		}
		if _, err := q.Fields(contract.FromRequest); err == nil {
			t.Errorf("Cookie %q: Fields(request) read, want refused", cookie)
		}
		if v, ok, err := q.Value(contract.FromQuery, name); err != nil || !ok || v != "7" {
			t.Errorf("Cookie %q: query %s = %q %v %v, want 7 (cookies are not $_GET)", cookie, name, v, ok, err)
		}
	}
	q := delivery(t, "POST", "/hook?InvId=7", "application/x-www-form-urlencoded", "SHP=1", "", "Cookie", "sess=abc")
	if v, ok, err := q.Value(contract.FromRequest, "InvId"); err != nil || !ok || v != "7" {
		t.Errorf("another cookie: request InvId = %q %v %v, want 7", v, ok, err)
	}
}
