package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/sqlite"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

func newStore(t *testing.T) dedupe.Store { return newBenchStore(t) }

// newBenchStore opens a throwaway SQLite store for a test or a benchmark.
func newBenchStore(t testing.TB) dedupe.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hookonce.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openAt opens the SQLite store at path: two handles on one file stand
// for two replicas on one host.
func openAt(t *testing.T, path string) dedupe.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func get(t *testing.T, s dedupe.Store, sender, key string) (dedupe.Record, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Get(ctx, sender, key)
}

func TestAcceptanceSQLite(t *testing.T) {
	proxytest.RunAcceptance(t, newStore)
}

const shopConfig = `
max_body: 1KiB
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
    upstream_timeout: 2s
    lease: 3s
`

func TestMissingKeyAndOversize(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, shopConfig)

	tests := []struct {
		name, body string
		want       int
	}{
		{"no id field", `{"amount":1}`, http.StatusBadRequest},
		{"not json", `amount=1`, http.StatusBadRequest},
		{"oversize", `{"id":"big","pad":"` + strings.Repeat("x", 2000) + `"}`, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := proxytest.Post(t, px.URL+"/hooks/shop", tt.body)
			if got.Status != tt.want || got.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("status %d (%s), want %d problem+json", got.Status, got.Header.Get("Content-Type"), tt.want)
			}
		})
	}
	if site.Total() != 0 {
		t.Fatalf("site called %d times for refused deliveries", site.Total())
	}
	if _, err := get(t, store, "shop", "big"); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("oversize delivery left a record: %v", err)
	}
	if recs, _ := store.List(context.Background(), dedupe.ListFilter{}); len(recs) != 0 {
		t.Fatalf("records after refused deliveries: %d", len(recs))
	}
}

// A chunked body (no Content-Length) over the limit is refused the same way.
func TestOversizeChunked(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, shopConfig)
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte(`{"id":"chunked","pad":"`))
		for i := 0; i < 10; i++ {
			_, _ = pw.Write(bytes.Repeat([]byte("y"), 500))
		}
		_, _ = pw.Write([]byte(`"}`))
		pw.Close()
	}()
	resp, err := http.Post(px.URL+"/hooks/shop", "application/json", pr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || site.Total() != 0 {
		t.Fatalf("chunked oversize: %d, site calls %d", resp.StatusCode, site.Total())
	}
}

func TestUpstream422IsStoredAndReplayed(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		io.WriteString(w, "unknown product")
	})
	px := proxytest.Start(t, store, site.URL, shopConfig)
	a := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"e422"}`)
	b := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"e422"}`)
	if a.Status != 422 || b.Status != 422 || !b.Replayed() || string(b.Body) != "unknown product" {
		t.Fatalf("answers %d / %d replayed=%v %q", a.Status, b.Status, b.Replayed(), b.Body)
	}
	if n := site.Executions("e422"); n != 1 {
		t.Fatalf("executions = %d, want 1", n)
	}
}

func TestRetryableAnswersFreeTheClaim(t *testing.T) {
	for _, status := range []int{408, 425, 429, 500, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			store := newStore(t)
			var calls atomic.Int64
			site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					w.WriteHeader(status)
					return
				}
				io.WriteString(w, "ok")
			})
			px := proxytest.Start(t, store, site.URL, shopConfig)
			if got := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"r"}`); got.Status != status {
				t.Fatalf("sender saw %d, want %d", got.Status, status)
			}
			if rec, err := get(t, store, "shop", "r"); err != nil || rec.State != dedupe.StateReleased {
				t.Fatalf("claim not freed: %v", err)
			}
			if got := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"r"}`); got.Status != 200 || got.Replayed() {
				t.Fatalf("retry: %d replayed=%v", got.Status, got.Replayed())
			}
			if n := site.Executions("r"); n != 2 {
				t.Fatalf("site calls = %d, want 2", n)
			}
		})
	}
}

func TestUnreachableSite(t *testing.T) {
	store := newStore(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	px := proxytest.Start(t, store, dead, shopConfig)
	got := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"u"}`)
	if got.Status != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", got.Status)
	}
	if rec, err := get(t, store, "shop", "u"); err != nil || rec.State != dedupe.StateReleased {
		t.Fatalf("claim kept for an unreachable site: %v", err)
	}
}

func TestUpstreamTimeoutAmbiguous(t *testing.T) {
	for _, mode := range []string{"release", "hold"} {
		t.Run(mode, func(t *testing.T) {
			store := newStore(t)
			var calls atomic.Int64
			site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					time.Sleep(800 * time.Millisecond)
				}
				io.WriteString(w, "ok")
			})
			cfg := strings.Replace(shopConfig, "upstream_timeout: 2s", "upstream_timeout: 300ms\n    ambiguous: "+mode, 1)
			px := proxytest.Start(t, store, site.URL, cfg)
			if got := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"slow"}`); got.Status != http.StatusGatewayTimeout {
				t.Fatalf("status %d, want 504", got.Status)
			}
			retry := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"slow"}`)
			rec, err := get(t, store, "shop", "slow")
			switch mode {
			case "release":
				if retry.Status != 200 || site.Executions("slow") != 2 {
					t.Fatalf("retry after release: %d, executions %d", retry.Status, site.Executions("slow"))
				}
			case "hold":
				if retry.Status != http.StatusConflict || retry.Header.Get("Retry-After") == "" {
					t.Fatalf("retry of a held claim: %d Retry-After=%q", retry.Status, retry.Header.Get("Retry-After"))
				}
				if err != nil || rec.State != dedupe.StateUnknown || site.Executions("slow") != 1 {
					t.Fatalf("held record = %+v, %v; executions %d", rec, err, site.Executions("slow"))
				}
				if err := store.Forget(context.Background(), "shop", "slow"); err != nil {
					t.Fatal(err)
				}
				if got := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"slow"}`); got.Status != 200 || site.Executions("slow") != 2 {
					t.Fatalf("after release: %d, executions %d", got.Status, site.Executions("slow"))
				}
			}
		})
	}
}

func TestInProgressReject(t *testing.T) {
	store := newStore(t)
	release := make(chan struct{})
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "ok")
	})
	cfg := strings.Replace(shopConfig, "lease: 3s", "lease: 3s\n    in_progress: reject", 1)
	px := proxytest.Start(t, store, site.URL, cfg)
	done := make(chan proxytest.Reply)
	go func() { done <- proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"held"}`) }()
	for site.Executions("held") == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	second := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"held"}`)
	close(release)
	first := <-done
	if second.Status != http.StatusConflict || second.Header.Get("Retry-After") == "" {
		t.Fatalf("second while first held: %d Retry-After=%q", second.Status, second.Header.Get("Retry-After"))
	}
	if first.Status != 200 || site.Executions("held") != 1 {
		t.Fatalf("first: %d, executions %d", first.Status, site.Executions("held"))
	}
}

// A slow site keeps its claim past the lease: the heartbeat renews it.
func TestHeartbeatKeepsSlowSiteClaim(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(1500 * time.Millisecond)
		io.WriteString(w, "ok")
	})
	cfg := strings.Replace(shopConfig, "lease: 3s", "lease: 500ms\n    in_progress: reject", 1)
	px := proxytest.Start(t, store, site.URL, cfg)
	done := make(chan proxytest.Reply)
	go func() { done <- proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"beat"}`) }()
	time.Sleep(1000 * time.Millisecond) // twice the lease
	second := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"beat"}`)
	<-done
	if second.Status != http.StatusConflict || site.Executions("beat") != 1 {
		t.Fatalf("second delivery during a slow forward: %d, executions %d", second.Status, site.Executions("beat"))
	}
}

// Trap 1: a site that commits and then drops the kept-alive connection
// must see one request per forward; the transport must not resend it.
func TestNoSilentResendOnDroppedConnection(t *testing.T) {
	store := newStore(t)
	var seen atomic.Int64
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Drop") == "" {
			io.WriteString(w, "ok") // warms a kept-alive connection
			return
		}
		seen.Add(1) // "commit"
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	px := proxytest.Start(t, store, site.URL, shopConfig)
	for i := 0; i < 3; i++ {
		proxytest.Post(t, px.URL+"/hooks/shop", fmt.Sprintf(`{"id":"warm%d"}`, i))
	}
	for i := 0; i < 5; i++ {
		id := fmt.Sprintf("drop%d", i)
		got := proxytest.Post(t, px.URL+"/hooks/shop", fmt.Sprintf(`{"id":%q}`, id), "X-Drop", "1")
		if got.Status != http.StatusBadGateway {
			t.Fatalf("dropped connection: status %d, want 502", got.Status)
		}
		if n := site.Executions(id); n != 1 {
			t.Fatalf("forward %d reached the site %d times, want 1", i, n)
		}
	}
	if seen.Load() != 5 {
		t.Fatalf("site committed %d times for 5 forwards", seen.Load())
	}
}

// Trap 2: a sender that hangs up mid-forward does not abort the site; the
// answer is stored and replayed to the retry.
func TestSenderHangupDoesNotAbortSite(t *testing.T) {
	store := newStore(t)
	finished := make(chan struct{})
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(500 * time.Millisecond):
		case <-r.Context().Done():
			t.Error("the site's request was cancelled when the sender hung up")
			return
		}
		io.WriteString(w, "order 7 created")
		close(finished)
	})
	px := proxytest.Start(t, store, site.URL, shopConfig)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, px.URL+"/hooks/shop", strings.NewReader(`{"id":"hang"}`))
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the sender did not give up")
	}
	<-finished
	var rec dedupe.Record
	var err error
	for i := 0; i < 100; i++ {
		if rec, err = get(t, store, "shop", "hang"); err == nil && rec.State == dedupe.StateDone {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rec.State != dedupe.StateDone {
		t.Fatalf("record after hang-up = %+v, %v; want done", rec, err)
	}
	retry := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"hang"}`)
	if !retry.Replayed() || string(retry.Body) != "order 7 created" || site.Executions("hang") != 1 {
		t.Fatalf("retry: replayed=%v %q, executions %d", retry.Replayed(), retry.Body, site.Executions("hang"))
	}
}

func TestForwardedHeaders(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, shopConfig)
	proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"h1"}`, "X-Forwarded-For", "6.6.6.6")
	h := site.LastHeader("h1")
	if got := h.Get("Idempotency-Key"); got != "shop:h1" {
		t.Fatalf("Idempotency-Key = %q, want shop:h1", got)
	}
	if got := h.Get("X-Forwarded-For"); got != "127.0.0.1" {
		t.Fatalf("X-Forwarded-For = %q: a client-sent value was trusted", got)
	}
}

func TestPassThroughUntouched(t *testing.T) {
	store := newStore(t)
	var got int64
	var mu sync.Mutex
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			n, _ := io.Copy(io.Discard, r.Body)
			mu.Lock()
			got = n
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("X-Page", "catalog")
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "<h1>catalog</h1>")
	})
	px := proxytest.Start(t, store, site.URL, shopConfig)

	resp, err := http.Get(px.URL + "/catalog?page=2")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || resp.Header.Get("X-Page") != "catalog" || string(body) != "<h1>catalog</h1>" {
		t.Fatalf("pass-through GET: %d %v %q", resp.StatusCode, resp.Header, body)
	}

	// A 64 MiB upload streams through: far over max_body (1KiB), so it
	// cannot have been buffered by the webhook path.
	const size = 64 << 20
	pr, pw := io.Pipe()
	go func() {
		buf := make([]byte, 1<<20)
		_, _ = rand.Read(buf)
		for i := 0; i < size>>20; i++ {
			if _, err := pw.Write(buf); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPut, px.URL+"/upload/big.bin", pr)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != http.StatusNoContent || got != size {
		t.Fatalf("upload: %d, site received %d bytes of %d", resp.StatusCode, got, size)
	}
	if recs, _ := store.List(context.Background(), dedupe.ListFilter{}); len(recs) != 0 {
		t.Fatalf("pass-through left %d records", len(recs))
	}
}

// Store down: fail closed with 503 + Retry-After; the site sees nothing.
func TestStoreDownFailsClosed(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, shopConfig)
	store.Close()
	got := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"down"}`)
	if got.Status != http.StatusServiceUnavailable || got.Header.Get("Retry-After") == "" || site.Total() != 0 {
		t.Fatalf("store down: %d Retry-After=%q site calls %d", got.Status, got.Header.Get("Retry-After"), site.Total())
	}
}

func TestStoreDownFailOpenWhenAsked(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, shopConfig+"    on_store_error: forward\n")
	store.Close()
	got := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"open"}`)
	if got.Status != 200 || site.Executions("open") != 1 {
		t.Fatalf("fail-open: %d, executions %d", got.Status, site.Executions("open"))
	}
	if !strings.Contains(px.Logs.String(), `"outcome":"store_error"`) {
		t.Fatalf("fail-open delivery not logged: %s", px.Logs)
	}
}

// The site's answer above max_stored_body is passed on whole, stored
// truncated, and replayed with an empty body.
func TestTruncatedStoredAnswer(t *testing.T) {
	store := newStore(t)
	big := strings.Repeat("z", 4096)
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) })
	px := proxytest.Start(t, store, site.URL, shopConfig+"    max_stored_body: 1KiB\n")
	first := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"big"}`)
	again := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"big"}`)
	if string(first.Body) != big || again.Status != 200 || len(again.Body) != 0 || !again.Replayed() {
		t.Fatalf("first %d bytes; replay %d with %d bytes replayed=%v", len(first.Body), again.Status, len(again.Body), again.Replayed())
	}
	rec, _ := get(t, store, "shop", "big")
	if rec.Response == nil || !rec.Response.Truncated || len(rec.Response.Body) != 1024 {
		t.Fatalf("stored = %+v", rec.Response)
	}
}

// Close during a slow forward: after the drain deadline the forward is
// aborted and its claim released, so the sender's retry runs it.
// Shutdown with a delivery at the site is an ambiguous outcome: the
// sender gets 503 + Retry-After, and the claim is released, or held under
// ambiguous: hold, never silently dropped; the log says ambiguous.
func TestCloseAbortsDeliveriesAtTheSite(t *testing.T) {
	for _, tt := range []struct {
		ambiguous string
		want      dedupe.State
	}{{"release", dedupe.StateReleased}, {"hold", dedupe.StateUnknown}} {
		t.Run(tt.ambiguous, func(t *testing.T) {
			store := newStore(t)
			site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			})
			px := proxytest.Start(t, store, site.URL, strings.Replace(shopConfig, "upstream_timeout: 2s",
				"upstream_timeout: 10s\n    ambiguous: "+tt.ambiguous, 1))
			done := make(chan proxytest.Reply)
			go func() { done <- proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"drain"}`) }()
			for site.Executions("drain") == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			if err := px.Proxy.Close(ctx); err == nil {
				t.Fatal("Close reported a clean drain while a forward was stuck")
			}
			if got := <-done; got.Status != http.StatusServiceUnavailable || got.Header.Get("Retry-After") == "" {
				t.Fatalf("aborted delivery answered %d, want 503 + Retry-After", got.Status)
			}
			if rec, err := get(t, store, "shop", "drain"); err != nil || rec.State != tt.want {
				t.Fatalf("record after shutdown: %+v %v, want state %s", rec, err, tt.want)
			}
			if !strings.Contains(px.Logs.String(), `"outcome":"ambiguous"`) {
				t.Fatal("the shutdown abort was not logged as ambiguous")
			}
		})
	}
}

// Raw HTTP keeps a test honest about what goes over the wire.
func rawRequest(t *testing.T, addr, raw string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestOversizeContentLengthRefusedBeforeBody(t *testing.T) {
	store := newStore(t)
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, shopConfig)
	addr := strings.TrimPrefix(px.URL, "http://")
	resp := rawRequest(t, addr, "POST /hooks/shop HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"id\":")
	if resp.StatusCode != http.StatusRequestEntityTooLarge || site.Total() != 0 {
		t.Fatalf("status %d, site calls %d; want 413 and none", resp.StatusCode, site.Total())
	}
	if recs, _ := store.List(context.Background(), dedupe.ListFilter{}); len(recs) != 0 {
		t.Fatalf("refused delivery left %d records", len(recs))
	}
}

// Behind the site's own nginx (a trusted proxy) the sender's address
// survives; from anyone else a client-sent X-Forwarded-For is dropped.
func TestTrustedProxyKeepsForwardedChain(t *testing.T) {
	for _, tt := range []struct {
		name, trusted, wantFor, wantProto string
	}{
		{"untrusted peer", "", "127.0.0.1", "http"},
		{"trusted peer", "trusted_proxies: [127.0.0.0/8]\n", "203.0.113.7, 127.0.0.1", "https"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t)
			site := proxytest.NewSite(t, nil)
			px := proxytest.Start(t, store, site.URL, tt.trusted+shopConfig)
			proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"xff"}`, "X-Forwarded-For", "203.0.113.7", "X-Forwarded-Proto", "https")
			h := site.LastHeader("xff")
			if got := h.Get("X-Forwarded-For"); got != tt.wantFor {
				t.Errorf("X-Forwarded-For = %q, want %q", got, tt.wantFor)
			}
			if got := h.Get("X-Forwarded-Proto"); got != tt.wantProto {
				t.Errorf("X-Forwarded-Proto = %q, want %q", got, tt.wantProto)
			}
		})
	}
}

// lostReply is the real store with one fault injected: the first Complete
// commits, then its reply is lost (trap 12: a COMMIT whose answer never
// arrived).
type lostReply struct {
	dedupe.Store
	lost atomic.Bool
}

func (l *lostReply) Complete(ctx context.Context, sender, key, owner string, resp dedupe.Response, att dedupe.Attempt) error {
	err := l.Store.Complete(ctx, sender, key, owner, resp, att)
	if err == nil && l.lost.CompareAndSwap(false, true) {
		return fmt.Errorf("complete: %w: connection reset after commit", dedupe.ErrUnavailable)
	}
	return err
}

func TestCompleteReplyLostIsNotReportedAsLost(t *testing.T) {
	store := &lostReply{Store: newStore(t)}
	site := proxytest.NewSite(t, nil)
	px := proxytest.Start(t, store, site.URL, shopConfig)
	first := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"lost"}`)
	again := proxytest.Post(t, px.URL+"/hooks/shop", `{"id":"lost"}`)
	if !store.lost.Load() {
		t.Fatal("the fault was never injected")
	}
	if first.Status != 200 || !again.Replayed() || site.Executions("lost") != 1 {
		t.Fatalf("first %d, repeat replayed=%v, executions %d", first.Status, again.Replayed(), site.Executions("lost"))
	}
	if logs := px.Logs.String(); strings.Contains(logs, "answer not stored") {
		t.Fatalf("a committed answer was logged as lost:\n%s", logs)
	}
}

// A chunked delivery reaches the site with its length: Apache's
// mod_proxy_fcgi gives php-fpm no CONTENT_LENGTH for a chunked request
// and PHP reads an empty body, where hookonce judged the one it read
// (found by the site-variant oracle, #33).
func TestChunkedDeliveryForwardedWithLength(t *testing.T) {
	type seen struct {
		te     []string
		length int64
		body   string
	}
	got := make(chan seen, 1)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.TransferEncoding, r.ContentLength, string(b)}
	}))
	t.Cleanup(site.Close)
	px := proxytest.Start(t, newStore(t), site.URL, shopConfig)
	body := `{"id":"ch1"}`
	resp := rawRequest(t, strings.TrimPrefix(px.URL, "http://"), "POST /hooks/shop HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"+
		fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body))
	resp.Body.Close()
	s := <-got
	if len(s.te) != 0 || s.length != int64(len(body)) || s.body != body {
		t.Fatalf("site got Transfer-Encoding %q, Content-Length %d, body %q; want the body with its length", s.te, s.length, s.body)
	}
}
