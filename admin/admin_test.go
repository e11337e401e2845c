package admin_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/sqlite"
	"github.com/hookonce/hookonce/dedupe/view"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

const testToken = "s3cr3t-admin-token-for-tests"

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hookonce.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// seed stores one done record with body, and returns it as the store has it.
func seed(t *testing.T, s dedupe.Store, sender, key string, status int, body []byte) dedupe.Record {
	t.Helper()
	ctx := context.Background()
	_, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: strings.Repeat("a", 64),
		Owner: "o-" + key, Lease: time.Minute, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		err = s.Complete(ctx, sender, key, "o-"+key, dedupe.Response{Status: status,
			Header: http.Header{"Content-Type": {"application/json"}, "X-Order": {"42"}}, Body: body}, dedupe.Attempt{At: time.Now(), By: dedupe.AttemptBySender, Outcome: "processed"})
		if err != nil {
			t.Fatal(err)
		}
	}
	rec, err := s.Get(ctx, sender, key)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

type fixture struct {
	store *sqlite.Store
	srv   *httptest.Server
	logs  *proxytest.SyncBuffer
}

func newFixture(t *testing.T, token string) *fixture {
	t.Helper()
	f := &fixture{store: openStore(t), logs: &proxytest.SyncBuffer{}}
	h, err := admin.New(admin.Options{Store: f.store, Token: token,
		Logger: slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, method, url, token string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b}
}

func TestAuth(t *testing.T) {
	f := newFixture(t, testToken)
	seed(t, f.store, "shop", "evt-1", 201, []byte(`{"ok":true}`))
	paths := []struct {
		path string
		open bool // answered without a token
	}{
		{"/healthz", true},
		{"/readyz", true},
		{"/metrics", false},
		{"/v1/events/shop/evt-1", false},
		{"/v1/events", false},
		{"/v1/conflicts", false},
	}
	auths := []struct {
		name   string
		header string
		ok     bool
	}{
		{"none", "", false},
		{"wrong token", "Bearer wrong-token", false},
		{"token prefix", "Bearer " + testToken[:10], false},
		{"token plus a byte", "Bearer " + testToken + "x", false},
		{"basic scheme", "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+testToken)), false},
		{"right token", "Bearer " + testToken, true},
		{"scheme in lower case", "bearer " + testToken, true},
	}
	for _, p := range paths {
		for _, a := range auths {
			t.Run(p.path+"/"+a.name, func(t *testing.T) {
				req, _ := http.NewRequest(http.MethodGet, f.srv.URL+p.path, nil)
				if a.header != "" {
					req.Header.Set("Authorization", a.header)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				want := http.StatusUnauthorized
				if p.open || a.ok {
					want = http.StatusOK
				}
				if resp.StatusCode != want {
					t.Fatalf("status = %d, want %d", resp.StatusCode, want)
				}
				if want == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("WWW-Authenticate = %q, want Bearer …", resp.Header.Get("WWW-Authenticate"))
				}
			})
		}
	}
	// DELETE is guarded too: a refused one leaves the record.
	if r := do(t, http.MethodDelete, f.srv.URL+"/v1/events/shop/evt-1", "wrong"); r.status != http.StatusUnauthorized {
		t.Fatalf("DELETE with a wrong token: %d", r.status)
	}
	if _, err := f.store.Get(context.Background(), "shop", "evt-1"); err != nil {
		t.Fatalf("record gone after a refused DELETE: %v", err)
	}
	if strings.Contains(f.logs.String(), testToken) {
		t.Fatal("the admin log contains the token")
	}
}

func TestNoTokenIsOpen(t *testing.T) {
	f := newFixture(t, "")
	for _, p := range []string{"/metrics", "/v1/events", "/v1/conflicts", "/ui/events"} {
		if r := do(t, http.MethodGet, f.srv.URL+p, ""); r.status != http.StatusOK {
			t.Errorf("GET %s without a configured token: %d", p, r.status)
		}
	}
}

func TestGetEventShowsTheStoredAnswerByteForByte(t *testing.T) {
	f := newFixture(t, testToken)
	binary := []byte{0xff, 0x00, 0xfe, 'o', 'k', 0x80}
	cases := []struct {
		name, key string
		body      []byte
		wantText  bool
	}{
		{"json", "evt-json", []byte("{\"order\":\"created\",\n \"note\":\"caf\u00e9 <b>&</b>\"}"), true},
		{"binary", "evt-bin", binary, false},
		{"empty", "evt-empty", []byte{}, true},
		{"key with a slash", "orders/77", []byte("done"), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seed(t, f.store, "shop", c.key, 200, c.body)
			r := do(t, http.MethodGet, f.srv.URL+"/v1/events/shop/"+c.key, testToken)
			if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
				t.Fatalf("GET: %d %s %s", r.status, r.header.Get("Content-Type"), r.body)
			}
			var got view.RecordJSON
			if err := json.Unmarshal(r.body, &got); err != nil {
				t.Fatal(err)
			}
			if got.Sender != "shop" || got.Key != c.key || got.State != dedupe.StateDone || got.Response == nil {
				t.Fatalf("record = %+v", got)
			}
			raw, err := base64.StdEncoding.DecodeString(got.Response.BodyBase64)
			if err != nil || !bytes.Equal(raw, c.body) {
				t.Fatalf("body_base64 decodes to %q, %v; want %q", raw, err, c.body)
			}
			if c.wantText != (got.Response.BodyText != nil) {
				t.Fatalf("body_text present = %v, want %v", got.Response.BodyText != nil, c.wantText)
			}
			if c.wantText && *got.Response.BodyText != string(c.body) {
				t.Fatalf("body_text = %q, want %q", *got.Response.BodyText, c.body)
			}
			if got.Response.Status != 200 || got.Response.Headers["X-Order"][0] != "42" {
				t.Fatalf("response = %+v", got.Response)
			}
		})
	}
	t.Run("escaped slash in the key", func(t *testing.T) {
		r := do(t, http.MethodGet, f.srv.URL+"/v1/events/shop/orders%2F77", testToken)
		if r.status != http.StatusOK || !bytes.Contains(r.body, []byte(`"key": "orders/77"`)) {
			t.Fatalf("GET: %d %s", r.status, r.body)
		}
	})
	t.Run("processing record has no response", func(t *testing.T) {
		seed(t, f.store, "shop", "evt-busy", 0, nil)
		r := do(t, http.MethodGet, f.srv.URL+"/v1/events/shop/evt-busy", testToken)
		var got map[string]any
		_ = json.Unmarshal(r.body, &got)
		if r.status != http.StatusOK || got["state"] != "processing" || got["response"] != nil || got["lease_until"] == nil {
			t.Fatalf("GET: %d %s", r.status, r.body)
		}
	})
}

func TestNotFoundIsAProblem(t *testing.T) {
	f := newFixture(t, testToken)
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v1/events/shop/nope"},
		{http.MethodDelete, "/v1/events/shop/nope"},
		{http.MethodGet, "/v1/nothing-here"},
	} {
		r := do(t, c.method, f.srv.URL+c.path, testToken)
		var p struct {
			Status int    `json:"status"`
			Title  string `json:"title"`
		}
		if err := json.Unmarshal(r.body, &p); err != nil || r.status != http.StatusNotFound || p.Status != 404 ||
			r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s: %d %s %s", c.method, c.path, r.status, r.header.Get("Content-Type"), r.body)
		}
	}
}

func TestDeleteForgetsTheRecord(t *testing.T) {
	f := newFixture(t, testToken)
	seed(t, f.store, "shop", "stuck", 0, nil) // a processing claim
	if r := do(t, http.MethodDelete, f.srv.URL+"/v1/events/shop/stuck", testToken); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if _, err := f.store.Get(context.Background(), "shop", "stuck"); err == nil {
		t.Fatal("record still there after DELETE")
	}
	if r := do(t, http.MethodDelete, f.srv.URL+"/v1/events/shop/stuck", testToken); r.status != http.StatusNotFound {
		t.Fatalf("second DELETE: %d, want 404", r.status)
	}
}

func TestListEvents(t *testing.T) {
	f := newFixture(t, testToken)
	seed(t, f.store, "shop", "a", 200, []byte("a"))
	seed(t, f.store, "shop", "b", 0, nil)
	seed(t, f.store, "stripe", "c", 200, []byte("c"))
	cases := []struct {
		query    string
		status   int
		wantKeys []string // in any order
	}{
		{"", 200, []string{"a", "b", "c"}},
		{"?sender=shop", 200, []string{"a", "b"}},
		{"?status=processing", 200, []string{"b"}},
		{"?sender=shop&status=done", 200, []string{"a"}},
		{"?sender=nobody", 200, []string{}},
		{"?limit=1", 200, nil}, // one record, whichever is newest
		{"?status=finished", 400, nil},
		{"?limit=0", 400, nil},
		{"?limit=many", 400, nil},
	}
	for _, c := range cases {
		t.Run(c.query, func(t *testing.T) {
			r := do(t, http.MethodGet, f.srv.URL+"/v1/events"+c.query, testToken)
			if r.status != c.status {
				t.Fatalf("status = %d, want %d (%s)", r.status, c.status, r.body)
			}
			if c.status != 200 {
				return
			}
			var got []view.RecordJSON
			if err := json.Unmarshal(r.body, &got); err != nil {
				t.Fatalf("%v: %s", err, r.body)
			}
			if c.query == "?limit=1" {
				if len(got) != 1 {
					t.Fatalf("got %d records, want 1", len(got))
				}
				return
			}
			keys := map[string]bool{}
			for _, g := range got {
				keys[g.Key] = true
			}
			if len(got) != len(c.wantKeys) {
				t.Fatalf("got %d records %v, want %v", len(got), keys, c.wantKeys)
			}
			for _, k := range c.wantKeys {
				if !keys[k] {
					t.Fatalf("missing %q in %v", k, keys)
				}
			}
		})
	}
}

func TestListConflicts(t *testing.T) {
	f := newFixture(t, testToken)
	ctx := context.Background()
	now := time.Now()
	for _, c := range []dedupe.Conflict{
		{Sender: "shop", Key: "k1", StoredHash: "aa", ReceivedHash: "bb", ReceivedAt: now, ExpiresAt: now.Add(time.Hour),
			ChangedPaths: []string{"amount", "items.0.qty"}},
		{Sender: "stripe", Key: "k2", StoredHash: "cc", ReceivedHash: "dd", ReceivedAt: now, ExpiresAt: now.Add(time.Hour)},
	} {
		if err := f.store.RecordConflict(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	r := do(t, http.MethodGet, f.srv.URL+"/v1/conflicts?sender=shop", testToken)
	var got []view.ConflictJSON
	if err := json.Unmarshal(r.body, &got); err != nil || r.status != 200 {
		t.Fatalf("%d %s %v", r.status, r.body, err)
	}
	if len(got) != 1 || got[0].Key != "k1" || got[0].StoredSHA256 != "aa" || got[0].ReceivedSHA256 != "bb" ||
		strings.Join(got[0].ChangedPaths, ",") != "amount,items.0.qty" {
		t.Fatalf("conflicts = %+v", got)
	}
	r = do(t, http.MethodGet, f.srv.URL+"/v1/conflicts", testToken)
	if err := json.Unmarshal(r.body, &got); err != nil || len(got) != 2 {
		t.Fatalf("all conflicts: %s", r.body)
	}
	// Without kept bodies the paths are an empty list, not null.
	if !bytes.Contains(r.body, []byte(`"changed_paths": []`)) {
		t.Fatalf("changed_paths of the conflict without bodies: %s", r.body)
	}
}

func TestReadyz(t *testing.T) {
	f := newFixture(t, testToken)
	if r := do(t, http.MethodGet, f.srv.URL+"/readyz", ""); r.status != http.StatusOK {
		t.Fatalf("readyz with the store up: %d", r.status)
	}
	f.store.Close() // the store goes away
	r := do(t, http.MethodGet, f.srv.URL+"/readyz", "")
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("readyz with the store closed: %d", r.status)
	}
	if r := do(t, http.MethodGet, f.srv.URL+"/healthz", ""); r.status != http.StatusOK {
		t.Fatalf("healthz with the store closed: %d", r.status)
	}
	if r := do(t, http.MethodGet, f.srv.URL+"/v1/events", testToken); r.status != http.StatusServiceUnavailable {
		t.Fatalf("list with the store closed: %d %s", r.status, r.body)
	}
}

func TestIsLoopback(t *testing.T) {
	cases := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:9090", true},
		{"127.1.2.3:9090", true},
		{"[::1]:9090", true},
		{"localhost:9090", true},
		{"LOCALHOST:0", true},
		{"[::ffff:127.0.0.1]:9090", true},
		{":9090", false},
		{"0.0.0.0:9090", false},
		{"[::]:9090", false},
		{"10.0.0.5:9090", false},
		{"example.com:9090", false},
		{"127.0.0.1", false}, // no port: not an address
	}
	for _, c := range cases {
		if got := admin.IsLoopback(c.addr); got != c.want {
			t.Errorf("IsLoopback(%q) = %v, want %v", c.addr, got, c.want)
		}
	}
}

func TestListenServesAndShutsDown(t *testing.T) {
	h, err := admin.New(admin.Options{Store: openStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := admin.Listen("127.0.0.1:0", h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := do(t, http.MethodGet, "http://"+s.Addr().String()+"/healthz", ""); r.status != http.StatusOK {
		t.Fatalf("healthz: %d", r.status)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-s.Done(); err != http.ErrServerClosed {
		t.Fatalf("Done = %v, want ErrServerClosed", err)
	}
	if _, err := http.Get("http://" + s.Addr().String() + "/healthz"); err == nil {
		t.Fatal("still serving after Shutdown")
	}
}
