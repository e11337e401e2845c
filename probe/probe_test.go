package probe_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/sqlite"
	"github.com/hookonce/hookonce/probe"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

const sandboxConfig = `
senders:
  - name: sandbox
    match: { method: POST, path: /hooks/probe }
    key: [ { body: id } ]
    wait_timeout: 20s
  - name: sandbox-header
    match: { method: POST, path: /hooks/header }
    key: [ { header: X-Event-Id } ]
`

func newStore(t *testing.T) dedupe.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hookonce.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// slowSite takes a moment per call so parallel deliveries overlap at it.
func slowSite(w http.ResponseWriter, r *http.Request) {
	time.Sleep(100 * time.Millisecond)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	// A fresh body per execution: a duplicate execution is visible in the answer.
	_, _ = w.Write([]byte(`{"order":"created","at":"` + time.Now().Format(time.RFC3339Nano) + `"}`))
}

func runProbe(t *testing.T, cfg probe.Config) (*probe.Result, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := probe.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("probe.Run: %v", err)
	}
	var out bytes.Buffer
	res.Print(&out)
	return res, out.String()
}

func rowsByCheck(res *probe.Result) map[string]probe.Row {
	m := map[string]probe.Row{}
	for _, r := range res.Rows {
		m[r.Check] = r
	}
	return m
}

func TestProbePassesAgainstHookonce(t *testing.T) {
	cases := []struct {
		name      string
		path      string
		sender    string
		keyHeader string
		admin     bool
		noToken   bool // the admin listener has no token (its DELETEs need the JSON content type)
		wantRows  int
	}{
		{name: "BodyKeyWithAdmin", path: "/hooks/probe", sender: "sandbox", admin: true, wantRows: 12},
		{name: "BodyKeyWithAdminNoToken", path: "/hooks/probe", sender: "sandbox", admin: true, noToken: true, wantRows: 12},
		{name: "BodyKeyNoAdmin", path: "/hooks/probe", sender: "sandbox", wantRows: 5},
		{name: "HeaderKeyWithAdmin", path: "/hooks/header", sender: "sandbox-header", keyHeader: "X-Event-Id", admin: true, wantRows: 12},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := newStore(t)
			site := proxytest.NewSite(t, slowSite)
			px := proxytest.Start(t, store, site.URL, sandboxConfig)
			cfg := probe.Config{Target: px.URL, Path: tc.path, Sender: tc.sender, KeyHeader: tc.keyHeader, Parallel: 8}
			if tc.admin {
				token := "s3cret"
				if tc.noToken {
					token = ""
				}
				h, err := admin.New(admin.Options{Store: store, Token: token})
				if err != nil {
					t.Fatal(err)
				}
				adm := httptest.NewServer(h)
				t.Cleanup(adm.Close)
				cfg.Admin, cfg.AdminToken = adm.URL, token
			}
			res, out := runProbe(t, cfg)
			t.Logf("table:\n%s", out)
			if !res.Passed() {
				t.Fatalf("probe failed against hookonce:\n%s\nlogs:\n%s", out, px.Logs.String())
			}
			if len(res.Rows) != tc.wantRows {
				t.Errorf("rows = %d, want %d:\n%s", len(res.Rows), tc.wantRows, out)
			}
			if strings.Contains(out, "FAIL") || !strings.Contains(out, "0 failed") {
				t.Errorf("table:\n%s", out)
			}
			// Counted at the site: each test event ran exactly once.
			if len(res.Keys) != 2 {
				t.Fatalf("keys = %v, want the new event and the parallel one", res.Keys)
			}
			for _, k := range res.Keys {
				if !strings.HasPrefix(k, probe.DefaultPrefix+"-") {
					t.Errorf("key %q lacks the probe prefix", k)
				}
				if n := site.Executions(k); n != 1 {
					t.Errorf("site executions of %s = %d, want 1", k, n)
				}
			}
			recs, err := store.List(context.Background(), dedupe.ListFilter{Sender: tc.sender})
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 0, false: 2}[tc.admin]; len(recs) != want || res.Released != tc.admin {
				t.Errorf("records left = %d released=%v, want %d (released only with admin)", len(recs), res.Released, want)
			}
		})
	}
}

func TestProbeFailsAgainstPlainProxy(t *testing.T) {
	site := proxytest.NewSite(t, slowSite)
	u, _ := url.Parse(site.URL)
	plain := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) }})
	t.Cleanup(plain.Close)

	res, out := runProbe(t, probe.Config{Target: plain.URL + "/hooks/probe", Sender: "sandbox", Parallel: 6})
	t.Logf("table:\n%s", out)
	if res.Passed() {
		t.Fatalf("probe passed against a plain proxy:\n%s", out)
	}
	rows := rowsByCheck(res)
	want := map[string]bool{
		"new event":           true,
		"exact repeat":        false,
		"same id, other body": false,
		"6 parallel, one id":  false,
		"6 parallel, answers": false,
	}
	for check, pass := range want {
		row, ok := rows[check]
		if !ok {
			t.Errorf("no row %q:\n%s", check, out)
			continue
		}
		if row.Pass != pass {
			t.Errorf("%s: pass = %v, want %v (observed %s)", check, row.Pass, pass, row.Observed)
		}
	}
	if got := rows["6 parallel, one id"].Observed; got != "6 of 6" {
		t.Errorf("parallel observed %q, want 6 of 6", got)
	}
	if n := site.Total(); n != 1+1+1+6 {
		t.Errorf("site ran %d times behind the plain proxy, want 9 (every delivery)", n)
	}
	if !strings.Contains(out, "FAIL") {
		t.Errorf("table has no FAIL:\n%s", out)
	}
}

func TestProbeSignsForEachScheme(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	cases := []struct {
		scheme string
		secret string // what probe signs with
		pass   bool
	}{
		{"stripe", secret, true},
		{"github", secret, true},
		{"shopify", secret, true},
		{"standard-webhooks", secret, true},
		{"slack", secret, true},
		{"hmac-sha256", secret, true},
		{"hmac-sha256", "wrong-secret", false},
		{"stripe", "wrong-secret", false},
		{"github", "wrong-secret", false},
	}
	for _, tc := range cases {
		t.Run(tc.scheme+map[bool]string{true: "", false: "WrongSecret"}[tc.pass], func(t *testing.T) {
			t.Setenv("PROBE_TEST_SECRET", secret)
			cfg := `
senders:
  - name: signed
    preset: ` + tc.scheme + `
    match: { path: /hooks/signed }
    signature: { secret_env: PROBE_TEST_SECRET }
`
			if tc.scheme == "hmac-sha256" { // no preset: the generic scheme names its header, the sender its key
				cfg = `
senders:
  - name: signed
    match: { path: /hooks/signed }
    key: [ { body: id } ]
    signature: { scheme: hmac-sha256, header: X-Signature, secret_env: PROBE_TEST_SECRET }
`
			}
			store := newStore(t)
			site := proxytest.NewSite(t, slowSite)
			px := proxytest.Start(t, store, site.URL, cfg)
			res, out := runProbe(t, probe.Config{Target: px.URL + "/hooks/signed", Sender: "signed",
				Scheme: tc.scheme, Secret: tc.secret, Parallel: 4})
			if res.Passed() != tc.pass {
				t.Fatalf("passed = %v, want %v:\n%s", res.Passed(), tc.pass, out)
			}
			if !tc.pass {
				if row := rowsByCheck(res)["new event"]; row.Pass || !strings.HasPrefix(row.Observed, "401") {
					t.Errorf("new event row = %+v, want a 401 FAIL", row)
				}
				if n := site.Total(); n != 0 {
					t.Errorf("site ran %d times for unsigned deliveries", n)
				}
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  probe.Config
		want string // substring of the error; "" for valid
	}{
		{"Valid", probe.Config{Target: "http://127.0.0.1:8080", Sender: "s"}, ""},
		{"NoTarget", probe.Config{Sender: "s"}, "--target is required"},
		{"BadTarget", probe.Config{Target: "ftp://x", Sender: "s"}, "--target"},
		{"NoSender", probe.Config{Target: "http://x"}, "--sender is required"},
		{"BadAdmin", probe.Config{Target: "http://x", Sender: "s", Admin: "127.0.0.1:9090"}, "--admin"},
		{"BadScheme", probe.Config{Target: "http://x", Sender: "s", Secret: "k", Scheme: "md5"}, "--scheme"},
		{"SecretWithoutScheme", probe.Config{Target: "http://x", Sender: "s", Secret: "k"}, "--scheme"},
		{"UnknownSchemeUnsigned", probe.Config{Target: "http://x", Sender: "s", Scheme: "stripee"}, "--scheme"},
		{"TooParallel", probe.Config{Target: "http://x", Sender: "s", Parallel: 1000}, "--parallel"},
		{"OneIsNotParallel", probe.Config{Target: "http://x", Sender: "s", Parallel: 1}, "--parallel"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
