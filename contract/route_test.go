package contract_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/contract"
)

func TestNormalizePath(t *testing.T) {
	for in, want := range map[string]string{
		"/bitrix/tools/stripe.php":          "/bitrix/tools/stripe.php",
		"//bitrix/tools/stripe.php":         "/bitrix/tools/stripe.php",
		"/bitrix/./tools/stripe.php":        "/bitrix/tools/stripe.php",
		"/bitrix//tools///stripe.php":       "/bitrix/tools/stripe.php",
		"/bitrix/x/../tools/stripe.php":     "/bitrix/tools/stripe.php",
		"/bitrix/tools/stripe.php/":         "/bitrix/tools/stripe.php",
		"/bitrix%2Ftools/stripe.php":        "/bitrix/tools/stripe.php",
		"/bitrix/tools/stripe%2ephp":        "/bitrix/tools/stripe.php",
		"/bitrix/tools/%2e%2e/tools/s.php":  "/bitrix/tools/s.php",
		"/%62itrix/tools/stripe.php":        "/bitrix/tools/stripe.php",
		"/":                                 "/",
		"":                                  "/",
		"/a/b/..":                           "/a",
		"/bitrix/tools/stripe.php/x/../../": "/bitrix/tools",
	} {
		got, err := contract.NormalizePath(in)
		if err != nil || got != want {
			t.Errorf("NormalizePath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"/..", "/a/../../b", "/a%00b", "/a%zzb", "/a%2", "/%2e%2e/a"} {
		if got, err := contract.NormalizePath(in); !errors.Is(err, contract.ErrBadPath) {
			t.Errorf("NormalizePath(%q) = %q, %v; want ErrBadPath", in, got, err)
		}
	}
}

func TestRoutes(t *testing.T) {
	c, err := contract.Parse([]byte(`
senders:
  - {name: script, match: {path: /pay/cb.php}, key: [{form: id}]}
  - {name: route, match: {path: /hooks/pay}, key: [{form: id}]}
  - {name: prefix, match: {path: /api/hooks/*}, key: [{form: id}]}
  - {name: deeper, match: {path: /api/hooks/special/*}, key: [{form: id}]}
`), "routes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/pay/cb.php":             "script",
		"/pay/cb.php/anything":    "script", // PATH_INFO
		"/pay/cb.php/a/b.php/c":   "script",
		"/pay/cb.phpx":            "",
		"/hooks/pay":              "route",
		"/hooks/pay/status":       "", // not a script: a sub-route is the app's own
		"/api/hooks/x":            "prefix",
		"/api/hooks":              "prefix",
		"/api/hooks/special/x":    "deeper",
		"/api/hooksx":             "",
		"/api/hooks/special":      "deeper", // "/x/*" owns "/x" too
		"/api/hooks/specialities": "prefix",
	} {
		got := ""
		if rt := c.Route(path); rt != nil {
			got = rt.Senders[0].Name
		}
		if got != want {
			t.Errorf("Route(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestSelectByConditions(t *testing.T) {
	c, err := contract.Parse([]byte(`
senders:
  - name: robokassa
    match: {path: /s.php, when: [{form: SHP_HANDLER, equals: ROBOXCHANGE}]}
    key: [{form: InvId}]
  - name: nested
    match: {path: /s.php, when: [{form: "data[FIELDS][ID]", matches: "^[0-9]+$"}, {header: X-B24, present: true}]}
    key: [{form: "data[FIELDS][ID]"}]
  - name: nokey
    match: {path: /s.php, method: "*", when: [{query: action, present: false}, {body: type, equals: x}]}
    key: [{body: id}]
paths:
  /s.php: {unmatched: pass}
`), "select.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rt := c.Route("/s.php")
	if rt == nil || rt.Unmatched != contract.UnmatchedPass || rt.Allowed() != nil {
		t.Fatalf("route = %+v", rt)
	}
	for _, tt := range []struct {
		method, target, ctype, body string
		header                      []string
		want                        string
	}{
		{"POST", "/s.php", "application/x-www-form-urlencoded", "SHP_HANDLER=other&SHP_HANDLER=ROBOXCHANGE", nil, "robokassa"},
		{"POST", "/s.php", "application/x-www-form-urlencoded", "SHP_HANDLER=ROBOXCHANGE&SHP_HANDLER=other", nil, ""},
		{"POST", "/s.php", "application/x-www-form-urlencoded", "data%5BFIELDS%5D%5BID%5D=42", []string{"X-B24", "1"}, "nested"},
		{"POST", "/s.php", "application/x-www-form-urlencoded", "data[FIELDS][ID]=42", nil, ""},
		{"PUT", "/s.php", "application/json", `{"type":"x","id":1}`, nil, "nokey"},
		{"PUT", "/s.php?action=1", "application/json", `{"type":"x","id":1}`, nil, ""},
		{"POST", "/s.php", "text/plain", `{"type":"x"}`, nil, "nokey"}, // JSON is read whatever the type, as php://input is
	} {
		r := httptest.NewRequest(tt.method, tt.target, strings.NewReader(tt.body))
		r.Header.Set("Content-Type", tt.ctype)
		for i := 0; i+1 < len(tt.header); i += 2 {
			r.Header.Set(tt.header[i], tt.header[i+1])
		}
		ch := rt.Select(contract.NewRequest(r, "/s.php", []byte(tt.body), c.ClientAddr(r.RemoteAddr, r.Header)))
		got := ""
		if ch.Sender != nil {
			got = ch.Sender.Name
		}
		if got != tt.want || len(ch.Why) == 0 {
			t.Errorf("%s %s %q: sender %q (why %q), want %q", tt.method, tt.target, tt.body, got, ch.Why, tt.want)
		}
	}
}

func TestRoutingConfigErrors(t *testing.T) {
	_, err := contract.Parse([]byte(`senders:
  - name: a
    match:
      path: //x/../y.php
      method: "PO ST"
      when:
        - {form: x}
        - {form: x, header: y, equals: "1"}
        - {form: x, matches: "("}
    key: [{form: id}]
    success: {body: "OK{nope.x}"}
  - name: b
    match: {path: /z.php}
    key: [{form: id}]
    success: {body: "OK", json: {code: 0}}
paths:
  /nowhere.php: {unmatched: pass}
  /z.php: {unmatched: maybe}
`), "bad.yaml")
	var ce *contract.Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *contract.Error", err)
	}
	want := []string{
		`bad.yaml:4: sender "a": field match.path: "//x/../y.php": write the path as the site runs it`,
		`bad.yaml:5: sender "a": field match.method: "PO ST": want a method`,
		`bad.yaml:7: sender "a": field match.when[0]: set exactly one of equals, present or matches`,
		`bad.yaml:8: sender "a": field match.when[1]: set exactly one of header, query, form, body, request or wc_api`,
		`bad.yaml:9: sender "a": field match.when[2]: matches: error parsing regexp`,
		`bad.yaml:11: sender "a": field success.body: {nope.x}: want {form.NAME}`,
		`bad.yaml:15: sender "b": field success.body: set at most one of body, body_matches and json`,
		`bad.yaml:18: field paths./z.php.unmatched: "maybe": want reject or pass`,
	}
	msg := err.Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("missing %q in:\n%s", w, msg)
		}
	}
	// A path no sender names is reported once the senders are valid.
	_, err = contract.Parse([]byte("senders:\n  - {name: a, match: {path: /a.php}, key: [{form: id}]}\npaths:\n  /b.php: {unmatched: pass}\n"), "p.yaml")
	if err == nil || !strings.Contains(err.Error(), `p.yaml:4: field paths./b.php: no sender names this path`) {
		t.Errorf("err = %v", err)
	}
}

func TestCompositeKeyEscaping(t *testing.T) {
	c, err := contract.Parse([]byte("senders:\n  - {name: t, match: {path: /t}, key: [{header: X-A}, {header: X-B}]}\n"), "k.yaml")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][2]string{}
	for _, parts := range [][2]string{{"a:b", "c"}, {"a", "b:c"}, {`a\`, ":c"}, {`a\:`, "c"}, {"a", `\:c`}, {`a\\`, "c"}} {
		r := httptest.NewRequest(http.MethodPost, "/t", nil)
		r.Header.Set("X-A", parts[0])
		r.Header.Set("X-B", parts[1])
		k, err := c.Senders[0].Key(keyRequest(r, nil))
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := keys[k]; dup {
			t.Errorf("parts %q and %q make one key %q", prev, parts, k)
		}
		keys[k] = parts
	}
}
