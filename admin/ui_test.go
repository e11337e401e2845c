package admin_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe"
)

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func page(t *testing.T, c *http.Client, req *http.Request) (int, http.Header, string) {
	t.Helper()
	if c == nil {
		c = noRedirect
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func get(t *testing.T, u string, cookie *http.Cookie, bearer string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if cookie != nil {
		req.AddCookie(cookie)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	return page(t, nil, req)
}

func sessionCookie(t *testing.T, h http.Header) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == admin.CookieName {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", admin.CookieName, h)
	return nil
}

func TestUILogin(t *testing.T) {
	f := newFixture(t, testToken)
	base := f.srv.URL

	status, h, body := get(t, base+"/ui/events", nil, "")
	if status != http.StatusUnauthorized || !strings.Contains(body, `name="token"`) || h.Get("WWW-Authenticate") == "" {
		t.Fatalf("/ui/events without a session: %d %q", status, body)
	}
	status, _, body = get(t, base+"/ui/login?token=wrong", nil, "")
	if status != http.StatusUnauthorized || !strings.Contains(body, "wrong-token") {
		t.Fatalf("login with a wrong token: %d", status)
	}

	check := func(t *testing.T, status int, h http.Header) *http.Cookie {
		t.Helper()
		if status != http.StatusSeeOther || h.Get("Location") != "/ui/events" {
			t.Fatalf("login: %d Location=%q", status, h.Get("Location"))
		}
		c := sessionCookie(t, h)
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui" {
			t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui", c)
		}
		if strings.Contains(c.Value, testToken) {
			t.Fatal("the cookie carries the token itself")
		}
		return c
	}
	var viaGet, viaPost *http.Cookie
	t.Run("GET ?token=", func(t *testing.T) {
		status, h, _ := get(t, base+"/ui/login?token="+url.QueryEscape(testToken), nil, "")
		viaGet = check(t, status, h)
	})
	t.Run("POST form", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, base+"/ui/login", strings.NewReader(url.Values{"token": {testToken}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		status, h, _ := page(t, nil, req)
		viaPost = check(t, status, h)
	})
	if viaGet == nil || viaPost == nil {
		t.FailNow()
	}

	cases := []struct {
		name   string
		path   string
		cookie *http.Cookie
		bearer string
		want   int
	}{
		{"cookie", "/ui/events", viaGet, "", 200},
		{"bearer header", "/ui/events", nil, testToken, 200},
		{"forged cookie", "/ui/events", &http.Cookie{Name: admin.CookieName, Value: strings.Repeat("0", 64)}, "", 401},
		{"token as cookie", "/ui/events", &http.Cookie{Name: admin.CookieName, Value: testToken}, "", 401},
		{"cookie on the API", "/v1/events", viaGet, "", 401},
		{"cookie on metrics", "/metrics", viaGet, "", 401},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if status, _, _ := get(t, base+c.path, c.cookie, c.bearer); status != c.want {
				t.Fatalf("%s: %d, want %d", c.path, status, c.want)
			}
		})
	}

	status, h, _ = get(t, base+"/ui/logout", viaGet, "")
	if c := sessionCookie(t, h); status != http.StatusSeeOther || c.MaxAge >= 0 {
		t.Fatalf("logout: %d, cookie %+v", status, c)
	}
	if strings.Contains(f.logs.String(), testToken) {
		t.Fatal("the admin log contains the token")
	}
}

func TestUIPages(t *testing.T) {
	f := newFixture(t, testToken)
	seed(t, f.store, "shop", "evt-html", 201, []byte(`<script>alert("x")</script> & done`))
	seed(t, f.store, "shop", "orders/9", 200, []byte("slash ok"))
	seed(t, f.store, "stripe", "evt-busy", 0, nil)
	seed(t, f.store, "stripe", "evt-bin", 200, []byte{0xff, 0xfe, 0x00})
	now := time.Now()
	if err := f.store.RecordConflict(context.Background(), dedupe.Conflict{Sender: "shop", Key: "evt-html",
		StoredHash: strings.Repeat("1", 64), ReceivedHash: strings.Repeat("2", 64), ReceivedAt: now,
		ExpiresAt: now.Add(time.Hour), ChangedPaths: []string{"data.amount"}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		path      string
		want      int
		contains  []string
		notContns []string
	}{
		{"all events", "/ui/events", 200,
			[]string{"evt-html", `href="/ui/events/shop/orders%2F9"`, "evt-busy", "state-processing", "evt-bin"}, nil},
		{"by state", "/ui/events?status=processing", 200, []string{"evt-busy"}, []string{"evt-html", "evt-bin"}},
		{"by sender", "/ui/events?sender=shop", 200, []string{"evt-html", "orders/9"}, []string{"evt-busy"}},
		{"bad state", "/ui/events?status=weird", 400, []string{"status: want processing, done, unknown, released, unretried or pending"}, nil},
		{"detail escapes the stored body", "/ui/events/shop/evt-html", 200,
			[]string{"&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; done", `id="status">201<`, "X-Order"},
			[]string{"<script>"}},
		{"detail of a key with a slash", "/ui/events/shop/orders%2F9", 200, []string{"slash ok"}, nil},
		{"detail of a binary body", "/ui/events/stripe/evt-bin", 200, []string{"Body (binary)", "//4A"}, []string{`id="body"`}},
		{"detail of a processing claim", "/ui/events/stripe/evt-busy", 200, []string{"no-response", "hookonce release stripe evt-busy"}, nil},
		{"detail of nothing", "/ui/events/shop/nope", 404, []string{"No record"}, nil},
		{"conflicts", "/ui/conflicts", 200, []string{"evt-html", "data.amount", "111111111111…"}, nil},
		{"/ui redirects", "/ui", 303, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, h, body := get(t, f.srv.URL+c.path, nil, testToken)
			if status != c.want {
				t.Fatalf("status = %d, want %d\n%s", status, c.want, body)
			}
			if status == 200 && !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
				t.Fatalf("CSP = %q", h.Get("Content-Security-Policy"))
			}
			for _, s := range c.contains {
				if !strings.Contains(body, s) {
					t.Errorf("page lacks %q", s)
				}
			}
			for _, s := range c.notContns {
				if strings.Contains(body, s) {
					t.Errorf("page contains %q", s)
				}
			}
			if t.Failed() {
				t.Logf("page:\n%s", body)
			}
		})
	}
}

func TestUILoginGoesOnOnlyWithinTheUI(t *testing.T) {
	f := newFixture(t, testToken)
	cases := []struct{ next, want string }{
		{"/ui/events/shop/evt-1", "/ui/events/shop/evt-1"},
		{"/ui/conflicts?sender=shop", "/ui/conflicts?sender=shop"},
		{"", "/ui/events"},
		{"https://evil.example/ui/", "/ui/events"},
		{"//evil.example/ui/", "/ui/events"},
		{"/v1/events", "/ui/events"},
		{`/ui/\evil.example`, "/ui/events"},
	}
	for _, c := range cases {
		t.Run(c.next, func(t *testing.T) {
			q := url.Values{"token": {testToken}, "next": {c.next}}
			status, h, _ := get(t, f.srv.URL+"/ui/login?"+q.Encode(), nil, "")
			if status != http.StatusSeeOther || h.Get("Location") != c.want {
				t.Fatalf("login with next=%q: %d Location=%q, want %q", c.next, status, h.Get("Location"), c.want)
			}
		})
	}
	// The login page shown for a guarded page carries it on.
	_, _, body := get(t, f.srv.URL+"/ui/events/shop/evt-1", nil, "")
	if !strings.Contains(body, `name="next" value="/ui/events/shop/evt-1"`) {
		t.Fatalf("login page does not carry the page on:\n%s", body)
	}
}

// uiFixture serves the admin handler with /ui sessions on a clock the test
// moves.
func uiFixture(t *testing.T, o admin.Options, tls bool) (*httptest.Server, *fakeClock) {
	t.Helper()
	clock := &fakeClock{now: time.Now()}
	o.Store, o.Token, o.Now = openStore(t), testToken, clock.Now
	h, err := admin.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, clock
}

// login signs in with the token and returns the session cookie.
func login(t *testing.T, srv *httptest.Server) *http.Cookie {
	t.Helper()
	c := srv.Client()
	c.CheckRedirect = noRedirect.CheckRedirect
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/login?token="+url.QueryEscape(testToken), nil)
	status, h, _ := page(t, c, req)
	if status != http.StatusSeeOther {
		t.Fatalf("login: %d", status)
	}
	return sessionCookie(t, h)
}

// signedIn reports whether cookie opens /ui/events.
func signedIn(t *testing.T, srv *httptest.Server, cookie *http.Cookie) bool {
	t.Helper()
	status, _, _ := get(t, srv.URL+"/ui/events", cookie, "")
	switch status {
	case http.StatusOK:
		return true
	case http.StatusUnauthorized:
		return false
	}
	t.Fatalf("/ui/events: %d", status)
	return false
}

func TestUISessions(t *testing.T) {
	t.Run("each login its own session, ended by logout", func(t *testing.T) {
		srv, _ := uiFixture(t, admin.Options{}, false)
		a, b := login(t, srv), login(t, srv)
		if a.Value == b.Value {
			t.Fatalf("two logins got the same session %q", a.Value)
		}
		if !signedIn(t, srv, a) || !signedIn(t, srv, b) {
			t.Fatal("a fresh session does not open the page")
		}
		status, h, _ := get(t, srv.URL+"/ui/logout", a, "")
		if c := sessionCookie(t, h); status != http.StatusSeeOther || c.MaxAge >= 0 || c.Value != "" {
			t.Fatalf("logout: %d, cookie %+v", status, c)
		}
		if signedIn(t, srv, a) {
			t.Fatal("the cookie still opens the page after logout")
		}
		if !signedIn(t, srv, b) {
			t.Fatal("logging one session out ended another")
		}
		// Logging in again makes a new session; the old cookie stays dead.
		if c := login(t, srv); c.Value == a.Value || signedIn(t, srv, a) {
			t.Fatal("a new login brought the logged-out session back")
		}
	})

	t.Run("a session expires", func(t *testing.T) {
		srv, clock := uiFixture(t, admin.Options{SessionTTL: time.Hour}, false)
		c := login(t, srv)
		if c.MaxAge != 3600 {
			t.Fatalf("cookie Max-Age %d, want 3600 (the session's TTL)", c.MaxAge)
		}
		clock.Advance(59 * time.Minute)
		if !signedIn(t, srv, c) {
			t.Fatal("the session ended before its TTL")
		}
		clock.Advance(time.Minute)
		if signedIn(t, srv, c) {
			t.Fatal("the session outlived its TTL")
		}
		clock.Advance(-time.Hour) // expired means gone, whatever the clock does next
		if signedIn(t, srv, c) {
			t.Fatal("an expired session came back")
		}
	})

	t.Run("the table is bounded", func(t *testing.T) {
		srv, clock := uiFixture(t, admin.Options{MaxSessions: 3}, false)
		var cs []*http.Cookie
		for i := 0; i < 4; i++ {
			cs = append(cs, login(t, srv))
			clock.Advance(time.Second)
		}
		if signedIn(t, srv, cs[0]) {
			t.Fatal("a fourth session in a table of three kept the oldest")
		}
		for i, c := range cs[1:] {
			if !signedIn(t, srv, c) {
				t.Fatalf("session %d of the last three was dropped", i+1)
			}
		}
	})

	t.Run("cookie attributes", func(t *testing.T) {
		cases := []struct {
			name       string
			tls        bool
			o          admin.Options
			wantSecure bool
		}{
			{"plain HTTP", false, admin.Options{}, false},
			{"TLS", true, admin.Options{}, true},
			{"plain HTTP behind a TLS proxy", false, admin.Options{SecureCookie: true}, true},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				srv, _ := uiFixture(t, tc.o, tc.tls)
				c := login(t, srv)
				if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui" || c.Secure != tc.wantSecure {
					t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui, Secure=%v", c, tc.wantSecure)
				}
				if c.MaxAge != int(admin.DefaultSessionTTL/time.Second) {
					t.Fatalf("cookie Max-Age %d, want the default TTL", c.MaxAge)
				}
				if strings.Contains(c.Value, testToken) || len(c.Value) < 22 {
					t.Fatalf("cookie value %q: want a random id, not the token", c.Value)
				}
				cl := srv.Client()
				cl.CheckRedirect = noRedirect.CheckRedirect
				req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/logout", nil)
				req.AddCookie(c)
				_, h, _ := page(t, cl, req)
				if out := sessionCookie(t, h); out.Secure != tc.wantSecure || !out.HttpOnly || out.Path != "/ui" {
					t.Fatalf("logout cookie %+v", out)
				}
			})
		}
	})
}

// A processing claim whose lease ended (its proxy died) is shown as such.
func TestLeaseExpiredShown(t *testing.T) {
	store := openStore(t)
	ctx := context.Background()
	if _, err := store.Claim(ctx, dedupe.ClaimRequest{Sender: "shop", Key: "orphan", PayloadHash: "h", Owner: "dead",
		Lease: 300 * time.Millisecond, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	h, err := admin.New(admin.Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) string {
		rec := httptest.NewRecorder()
		// httptest's default Host, example.com, is refused without a token.
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1"+path, nil))
		return rec.Body.String()
	}
	if strings.Contains(get("/ui/events"), "lease expired") {
		t.Fatal("a live lease shown as expired")
	}
	time.Sleep(400 * time.Millisecond)
	if !strings.Contains(get("/ui/events"), "lease expired") || !strings.Contains(get("/ui/events/shop/orphan"), `id="lease-expired"`) {
		t.Fatal("an expired lease is not shown as such")
	}
}

// TestUISignOutOnlyWithSignIn: "Sign out" is offered only where there is a
// sign-in to end (a listener with a token); without one the link would
// lead nowhere.
func TestUISignOutOnlyWithSignIn(t *testing.T) {
	for _, c := range []struct {
		token string
		want  bool
	}{{testToken, true}, {"", false}} {
		f := newFixture(t, c.token)
		status, _, body := get(t, f.srv.URL+"/ui/events", nil, c.token)
		if status != http.StatusOK {
			t.Fatalf("token %v: /ui/events %d", c.token != "", status)
		}
		if got := strings.Contains(body, "Sign out"); got != c.want {
			t.Errorf("token %v: the page offers Sign out: %v, want %v", c.token != "", got, c.want)
		}
	}
}
