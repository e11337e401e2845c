package cli

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/view"
	"github.com/hookonce/hookonce/internal/testkit/servetest"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

func TestServeRefusesAnOpenAdminListener(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty-token")
	writeFile(t, empty, " \n")
	token := filepath.Join(dir, "token")
	writeFile(t, token, "tok\n")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"all interfaces, no token", []string{"--admin-listen", "0.0.0.0:9090"}, "not a loopback address"},
		{"empty host, no token", []string{"--admin-listen", ":9090"}, "not a loopback address"},
		{"IPv6 any, no token", []string{"--admin-listen", "[::]:9090"}, "not a loopback address"},
		{"LAN address, no token", []string{"--admin-listen", "10.1.2.3:9090"}, "not a loopback address"},
		{"a host name, no token", []string{"--admin-listen", "admin.internal:9090"}, "not a loopback address"},
		{"empty token file", []string{"--admin-listen", "0.0.0.0:9090", "--admin-token-file", empty}, "empty"},
		{"missing token file", []string{"--admin-token-file", filepath.Join(dir, "none")}, "none"},
		{"token and token file", []string{"--admin-token", "x", "--admin-token-file", token}, "not both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "h.db")
			args := append([]string{"serve", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0",
				"--store", "sqlite:" + db}, tt.args...)
			_, errOut, code := hookonce(t, args...)
			if code != 2 || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 naming %q", code, errOut, tt.want)
			}
			if _, err := os.Stat(db); err == nil {
				t.Fatal("serve opened the store before refusing")
			}
		})
	}
	t.Run("from the environment", func(t *testing.T) {
		t.Setenv("HOOKONCE_ADMIN_LISTEN", "0.0.0.0:9090")
		_, errOut, code := hookonce(t, "serve", "--upstream", "http://127.0.0.1:1", "--store", "sqlite:"+filepath.Join(t.TempDir(), "h.db"))
		if code != 2 || !strings.Contains(errOut, "0.0.0.0:9090") {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
	})
}

// httpGet fetches u with an optional bearer token.
func httpGet(t *testing.T, u, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// serve starts the admin listener beside the proxy, with the token from a
// file, and stops it with the proxy.
func TestServeAdminListener(t *testing.T) {
	dir := t.TempDir()
	const token = "admin-token-from-a-file-9d2e"
	tokFile := filepath.Join(dir, "token")
	writeFile(t, tokFile, "\n  "+token+"\n")
	cfg := filepath.Join(dir, "hookonce.yaml")
	writeFile(t, cfg, e2eConfig)
	site := proxytest.NewSite(t, nil)
	s := startServe(t, "--upstream", site.URL, "--config", cfg, "--store", "sqlite:"+filepath.Join(dir, "h.db"),
		"--admin-listen", "127.0.0.1:0", "--admin-token-file", tokFile)
	admin := s.Admin

	first := proxytest.Post(t, s.URL+"/hooks/shop", `{"id":"ord-7"}`)
	proxytest.Post(t, s.URL+"/hooks/shop", `{"id":"ord-7"}`)

	cases := []struct {
		path, token string
		status      int
		contains    []string
	}{
		{"/healthz", "", 200, []string{"ok"}},
		{"/readyz", "", 200, []string{"ok"}},
		{"/metrics", "", 401, nil},
		{"/metrics", "wrong", 401, nil},
		{"/metrics", token, 200, []string{
			`hookonce_requests_total{outcome="processed",sender="shop"} 1`,
			`hookonce_requests_total{outcome="duplicate",sender="shop"} 1`,
			`hookonce_upstream_duration_seconds_count{sender="shop"} 1`,
			`hookonce_store_duration_seconds_count{op="claim"} 2`,
			"hookonce_inflight 0", "go_goroutines", "process_cpu_seconds_total"}},
		{"/v1/events/shop/ord-7", "", 401, nil},
		{"/v1/events/shop/ord-7", token, 200, []string{`"state": "done"`, base64.StdEncoding.EncodeToString(first.Body)}},
		{"/v1/events?sender=shop", token, 200, []string{`"key": "ord-7"`}},
		{"/v1/conflicts", token, 200, []string{"[]"}},
		{"/ui/events", "", 401, []string{`name="token"`}},
		{"/ui/events", token, 200, []string{"ord-7"}},
	}
	for _, c := range cases {
		t.Run(c.path+"/"+map[bool]string{true: "with token", false: "without"}[c.token == token], func(t *testing.T) {
			status, body := httpGet(t, admin+c.path, c.token)
			if status != c.status {
				t.Fatalf("status %d, want %d: %s", status, c.status, body)
			}
			for _, w := range c.contains {
				if !strings.Contains(body, w) {
					t.Errorf("answer lacks %q:\n%.2000s", w, body)
				}
			}
		})
	}

	s.Terminate(t)
	if _, err := http.Get(admin + "/healthz"); err == nil {
		t.Fatal("the admin listener still answers after serve stopped")
	}
	for _, l := range s.Logs() {
		if b, _ := json.Marshal(l); strings.Contains(string(b), token) {
			t.Fatalf("the log shows the admin token: %s", b)
		}
	}
}

// After the acceptance protocol, lookup shows every stored answer byte for
// byte and conflicts lists the changed payload.
func TestLookupAndConflictsAfterTheProtocol(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	store := servetest.OpenStore(t, "sqlite:"+path)
	proxytest.RunAcceptance(t, func(*testing.T) dedupe.Store { return store })
	if t.Failed() {
		t.FailNow()
	}
	dsn := "sqlite:" + path
	recs, err := store.List(context.Background(), dedupe.ListFilter{Sender: "shop"})
	if err != nil || len(recs) != 3 {
		t.Fatalf("protocol left %d records, %v; want 3", len(recs), err)
	}
	for _, rec := range recs {
		t.Run("lookup "+rec.Key, func(t *testing.T) {
			out, errOut, code := hookonce(t, "lookup", "--json", "--store", dsn, "shop", rec.Key)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var got view.RecordJSON
			if err := json.Unmarshal([]byte(out), &got); err != nil || got.Response == nil {
				t.Fatalf("%v: %s", err, out)
			}
			raw, err := base64.StdEncoding.DecodeString(got.Response.BodyBase64)
			if err != nil || string(raw) != string(rec.Response.Body) || got.Response.BodyText == nil ||
				*got.Response.BodyText != string(rec.Response.Body) {
				t.Fatalf("lookup shows %q / %v, the store holds %q", raw, got.Response.BodyText, rec.Response.Body)
			}
			out, _, _ = hookonce(t, "lookup", "--store", dsn, "shop", rec.Key)
			if !strings.Contains(out, "\n"+string(rec.Response.Body)+"\n") || !strings.Contains(out, "response: 201") {
				t.Fatalf("lookup (text) does not show the stored answer:\n%s", out)
			}
		})
	}

	out, errOut, code := hookonce(t, "conflicts", "--store", dsn)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// The table, then why a conflict cannot be accepted (its payload was not kept).
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "SENDER") || !strings.Contains(lines[1], "evt-") ||
		!strings.Contains(lines[1], "no: payload not kept") || !strings.Contains(lines[2], "store_request_body is off") {
		t.Fatalf("conflicts exit %d %s:\n%s", code, errOut, out)
	}
	out, _, code = hookonce(t, "conflicts", "--json", "--store", dsn, "--sender", "shop")
	var cs []view.ConflictJSON
	if code != 0 || json.Unmarshal([]byte(out), &cs) != nil || len(cs) != 1 {
		t.Fatalf("conflicts --json exit %d:\n%s", code, out)
	}
	stored, err := store.Get(context.Background(), "shop", cs[0].Key)
	if err != nil || cs[0].StoredSHA256 != stored.PayloadHash || cs[0].ReceivedSHA256 == stored.PayloadHash || cs[0].ChangedPaths == nil {
		t.Fatalf("conflict %+v; stored hash %s, %v", cs[0], stored.PayloadHash, err)
	}
	if out, _, _ := hookonce(t, "conflicts", "--json", "--store", dsn, "--sender", "nobody"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("conflicts of an unknown sender: %s", out)
	}
}

const releaseConfig = `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
    ambiguous: hold
    in_progress: reject
    upstream_timeout: 300ms
`

// release frees a stuck claim (held after an ambiguous outcome, or left
// processing by a proxy that died) so that the next delivery is processed.
func TestReleaseFreesAStuckClaim(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	store := servetest.OpenStore(t, "sqlite:"+path)
	var hang atomic.Bool
	hang.Store(true)
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() {
			time.Sleep(time.Second) // past upstream_timeout
		}
		fmt.Fprint(w, `{"ok":true}`)
	})
	px := proxytest.Start(t, store, site.URL, releaseConfig)
	dsn := "sqlite:" + path

	tests := []struct {
		name  string
		id    string
		stick func(t *testing.T, body string) // leaves the claim stuck
		state dedupe.State
	}{
		{"held after an ambiguous outcome", "amb-1", func(t *testing.T, body string) {
			hang.Store(true)
			if r := proxytest.Post(t, px.URL+"/hooks/shop", body); r.Status != http.StatusGatewayTimeout {
				t.Fatalf("hanging site: %d, want 504", r.Status)
			}
		}, dedupe.StateUnknown},
		{"processing, its proxy gone", "dead-1", func(t *testing.T, body string) {
			sum := sha256.Sum256([]byte(body))
			_, err := store.Claim(context.Background(), dedupe.ClaimRequest{Sender: "shop", Key: "dead-1",
				PayloadHash: hex.EncodeToString(sum[:]), Owner: "a-proxy-that-died", Lease: time.Hour, TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
		}, dedupe.StateProcessing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"id":%q}`, tt.id)
			tt.stick(t, body)
			hang.Store(false)
			if r := proxytest.Post(t, px.URL+"/hooks/shop", body); r.Status != http.StatusConflict {
				t.Fatalf("delivery on the stuck claim: %d, want 409", r.Status)
			}
			before := site.Executions(tt.id)
			out, errOut, code := hookonce(t, "release", "--store", dsn, "shop", tt.id)
			if code != 0 || !strings.Contains(out, "released shop/"+tt.id+" (was "+string(tt.state)+")") {
				t.Fatalf("release exit %d: %s %s", code, out, errOut)
			}
			// The record stays, released, with its history and the
			// operator's attempt: if the sender never comes back, the
			// event is still there to see (unretried), not gone.
			rec, err := store.Get(context.Background(), "shop", tt.id)
			if err != nil || rec.State != dedupe.StateReleased || len(rec.Attempts) == 0 {
				t.Fatalf("after release: %+v %v, want a released record with attempts", rec, err)
			}
			if last := rec.LastAttempt(); last.By != dedupe.AttemptByOperator || last.Outcome != "released" {
				t.Fatalf("last attempt %+v, want the operator's release", last)
			}
			kept := len(rec.Attempts)
			r := proxytest.Post(t, px.URL+"/hooks/shop", body)
			if r.Status != http.StatusOK || r.Replayed() || site.Executions(tt.id) != before+1 {
				t.Fatalf("after release: %d replayed=%v executions %d→%d; want processed once", r.Status, r.Replayed(), before, site.Executions(tt.id))
			}
			if r := proxytest.Post(t, px.URL+"/hooks/shop", body); !r.Replayed() {
				t.Fatalf("the delivery after release was not stored: %d", r.Status)
			}
			if rec, err := store.Get(context.Background(), "shop", tt.id); err != nil || len(rec.Attempts) != kept+1 {
				t.Fatalf("after the next delivery: %d attempts, %v; want the %d before it and its own", len(rec.Attempts), err, kept)
			}
		})
	}
	t.Run("no such record", func(t *testing.T) {
		if _, errOut, code := hookonce(t, "release", "--store", dsn, "shop", "never-seen"); code != 3 || !strings.Contains(errOut, "never-seen") {
			t.Fatalf("exit %d %q, want 3", code, errOut)
		}
	})
	t.Run("json", func(t *testing.T) {
		out, _, code := hookonce(t, "release", "--json", "--store", dsn, "shop", "amb-1")
		var got map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got["released"] != true || got["state"] != "done" {
			t.Fatalf("exit %d: %s", code, out)
		}
	})
}

// purge removes only what is older than asked, and never a live claim.
func TestPurge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	store := servetest.OpenStore(t, "sqlite:"+path)
	ctx := context.Background()
	now := time.Now()
	claim := func(key string, lease, ttl time.Duration, done bool) {
		t.Helper()
		_, err := store.Claim(ctx, dedupe.ClaimRequest{Sender: "shop", Key: key, PayloadHash: "h", Owner: "o-" + key, Lease: lease, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		if done {
			if err := store.Complete(ctx, "shop", key, "o-"+key, dedupe.Response{Status: 200}, dedupe.Attempt{At: time.Now(), By: dedupe.AttemptBySender, Outcome: "processed"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	claim("old-done", time.Hour, 72*time.Hour, true)
	claim("recent-done", time.Hour, 72*time.Hour, true)
	claim("old-live-claim", time.Hour, 72*time.Hour, false)
	claim("old-dead-claim", time.Millisecond, 72*time.Hour, false)
	claim("ttl-passed", time.Hour, time.Millisecond, true)
	time.Sleep(20 * time.Millisecond) // the 1ms lease and ttl pass

	// Receipt times are the store's to set: move them back in the file.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for key, ago := range map[string]time.Duration{"old-done": 3 * time.Hour, "old-live-claim": 3 * time.Hour,
		"old-dead-claim": 3 * time.Hour, "recent-done": time.Hour} {
		if _, err := db.Exec(`UPDATE records SET received_at = ? WHERE sender = 'shop' AND key = ?`, now.Add(-ago).UnixMilli(), key); err != nil {
			t.Fatal(err)
		}
	}

	remaining := func() []string {
		t.Helper()
		recs, err := store.List(ctx, dedupe.ListFilter{Sender: "shop"})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, r := range recs {
			keys = append(keys, r.Key)
		}
		slices.Sort(keys)
		return keys
	}
	steps := []struct {
		name string
		args []string
		out  string
		keep string // remaining keys, sorted
	}{
		{"past ttl", nil, "purged 1 records", "old-dead-claim,old-done,old-live-claim,recent-done"},
		{"older than 4h: nothing", []string{"--older-than", "4h"}, "purged 0 records", "old-dead-claim,old-done,old-live-claim,recent-done"},
		{"older than 2h", []string{"--older-than", "2h"}, "purged 2 records", "old-live-claim,recent-done"},
		{"older than 30m, as JSON", []string{"--older-than", "30m", "--json"}, `"purged": 1`, "old-live-claim"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			out, errOut, code := hookonce(t, append([]string{"purge", "--store", "sqlite:" + path}, st.args...)...)
			if code != 0 || !strings.Contains(out, st.out) {
				t.Fatalf("exit %d, out %q %s; want %q", code, out, errOut, st.out)
			}
			if got := strings.Join(remaining(), ","); got != st.keep {
				t.Fatalf("left %s, want %s", got, st.keep)
			}
		})
	}
}

func TestOpsUsage(t *testing.T) {
	store := "sqlite:" + filepath.Join(t.TempDir(), "h.db")
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"release", "--store", store, "shop"}, 2, "usage"},
		{[]string{"release", "--store", store, "shop", "nope"}, 3, `"nope"`},
		{[]string{"purge", "--store", store, "--older-than", "-1h"}, 2, "positive"},
		{[]string{"purge", "--store", store, "--older-than", "a week"}, 2, "older-than"},
		{[]string{"purge", "--store", store, "extra"}, 2, "usage"},
		{[]string{"conflicts", "--store", store, "--limit", "0"}, 2, "limit"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, errOut, code := hookonce(t, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d stderr %q stdout %q; want %d naming %q", code, errOut, out, tt.code, tt.want)
			}
		})
	}
}

// serve hands its /ui session flags to the admin listener: a sign-in lasts
// --admin-session-ttl, and --admin-secure-cookie marks the cookie Secure.
func TestServeUISessionFlags(t *testing.T) {
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	writeFile(t, tokFile, "tok-ui-sessions\n")
	s := startServe(t, "--upstream", proxytest.NewSite(t, nil).URL, "--store", "sqlite:"+filepath.Join(dir, "h.db"),
		"--admin-token-file", tokFile, "--admin-session-ttl", "1s", "--admin-secure-cookie")
	admin := s.Admin
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(admin + "/ui/login?token=tok-ui-sessions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		cookie = c
	}
	if cookie == nil || !cookie.Secure || cookie.MaxAge != 1 {
		t.Fatalf("login cookie %+v: want Secure with Max-Age 1", cookie)
	}
	page := func() int {
		req, _ := http.NewRequest(http.MethodGet, admin+"/ui/events", nil)
		req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := page(); got != http.StatusOK {
		t.Fatalf("/ui/events with a fresh session: %d", got)
	}
	time.Sleep(1100 * time.Millisecond)
	if got := page(); got != http.StatusUnauthorized {
		t.Fatalf("/ui/events after --admin-session-ttl: %d, want 401", got)
	}
	s.Terminate(t)
}
