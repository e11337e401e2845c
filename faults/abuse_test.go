package faults_test

// Abuse before trust, against a real `hookonce serve`: what anyone who can
// reach the port may make it do before a signature holds. Expected, written
// down before the run: every adversarial body is refused (401, or 400 for
// a form nested past hookonce's budget), the site never runs, and the
// process's peak RSS while 64 such bodies of 1 MiB arrive at once stays
// under 256 MiB (it was ~2.4 GiB for [0,0,…] before the JSON reader walked
// bodies in place).

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const abuseConfig = `
senders:
  - name: stripe
    preset: stripe
    match: { path: /bitrix/tools/stripe.php }
    signature: { secret_env: ABUSE_STRIPE_SECRET }
  - name: robokassa
    preset: robokassa
    match: { path: /bitrix/tools/sale_ps_result.php }
    signature: { secret_env: ABUSE_ROBOKASSA_SECRET }
`

// procStatus reads a kB field (VmHWM, VmRSS) of /proc/<pid>/status, in
// bytes. A field it cannot read fails the test: a peak of 0 or -1 would
// pass any bound.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil || n <= 0 {
				t.Fatalf("/proc/%d/status: %s:%s", pid, field, v)
			}
			return n << 10
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

func repeatTo(unit string, size int) string {
	var b strings.Builder
	b.WriteByte('[')
	for b.Len() < size-len(unit)-2 {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(unit)
	}
	b.WriteByte(']')
	return b.String()
}

func nestedFormBody(fields, depth int) string {
	parts := make([]string, fields)
	for i := range parts {
		parts[i] = fmt.Sprintf("f%d%s=1", i, strings.Repeat("[a]", depth))
	}
	return strings.Join(parts, "&")
}

func TestAdversarialBodiesBeforeTheSignature(t *testing.T) {
	needBinary(t)
	s := newSite(t, nil)
	p := startServe(t, serveOpts{
		store: "sqlite:" + filepath.Join(t.TempDir(), "hookonce.db"), upstream: s.URL, config: abuseConfig,
		env: []string{"ABUSE_STRIPE_SECRET=whsec_abuse", "ABUSE_ROBOKASSA_SECRET=abuse-password-2"},
	})
	const concurrent, mib, bound = 64, 1 << 20, 256 << 20
	shapes := []struct {
		name, path, ctype, body string
		status                  int
	}{
		{"numbers", "/bitrix/tools/stripe.php", "application/json", repeatTo("0", mib-1), 401},
		{"empty objects", "/bitrix/tools/stripe.php", "application/json", repeatTo("{}", mib-1), 401},
		{"empty arrays", "/bitrix/tools/stripe.php", "application/json", repeatTo("[]", mib-1), 401},
		{"nested form", "/bitrix/tools/sale_ps_result.php", "application/x-www-form-urlencoded", nestedFormBody(1000, 64), 400},
		{"wide form", "/bitrix/tools/sale_ps_result.php", "application/x-www-form-urlencoded", nestedFormBody(1000, 1) + strings.Repeat("&x=1", 200000), 401},
	}
	client := newClient(t, 60*time.Second)
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = concurrent
	for _, sh := range shapes {
		t.Run(strings.ReplaceAll(sh.name, " ", "_"), func(t *testing.T) {
			// Reset the peak (VmHWM) to now, so it is this shape's.
			_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.Pid()), []byte("5"), 0)
			before := procStatus(t, p.Pid(), "VmRSS")
			statuses := make(map[int]int)
			var mu sync.Mutex
			var wg sync.WaitGroup
			for range concurrent {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest("POST", p.URL+sh.path, bytes.NewReader([]byte(sh.body)))
					req.Header.Set("Content-Type", sh.ctype)
					status := 0
					if resp, err := client.Do(req); err == nil {
						status = resp.StatusCode
						resp.Body.Close()
					}
					mu.Lock()
					statuses[status]++
					mu.Unlock()
				}()
			}
			wg.Wait()
			peak := procStatus(t, p.Pid(), "VmHWM")
			t.Logf("%s: %d × %d KiB at once: answers %v; RSS %d MiB before, peak %d MiB (bound %d MiB)",
				sh.name, concurrent, len(sh.body)>>10, statuses, before>>20, peak>>20, bound>>20)
			if statuses[sh.status] != concurrent {
				t.Errorf("answers %v, want %d × %d", statuses, concurrent, sh.status)
			}
			if peak > bound {
				t.Errorf("peak RSS %d MiB over %d MiB", peak>>20, bound>>20)
			}
		})
	}
	if n := s.Total(); n != 0 {
		t.Fatalf("the site ran %d times for unsigned requests", n)
	}
}

// A site that answers before it read the whole body, and sockets that
// send headers and nothing more, against a real serve. Expected, written
// down first: one execution for three deliveries of one 900 KB event, the
// first answer replayed to the others; a delivery among 300 idle sockets
// (past max_inflight 256) answered and run once.
func TestEarlyAnswersAndIdleSockets(t *testing.T) {
	needBinary(t)
	s := newSite(t, nil)
	// The counting site reads whole bodies; this one answers from the
	// headers alone, as Go's server does past 256 KB unread.
	early := newEarlySite(t)
	p := startServe(t, serveOpts{
		store: "sqlite:" + filepath.Join(t.TempDir(), "hookonce.db"), upstream: early.URL,
		config: "senders:\n  - name: shop\n    match: { path: /hooks/shop }\n    key: [ { header: X-Event-Id } ]\n",
	})
	client := newClient(t, 30*time.Second)
	big := `{"id":"big","pad":"` + strings.Repeat("x", 900<<10) + `"}`
	var answers []string
	for range 3 {
		req, _ := http.NewRequest("POST", p.URL+"/hooks/shop", strings.NewReader(big))
		req.Header.Set("X-Event-Id", "big")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		answers = append(answers, fmt.Sprintf("%d replayed=%s", resp.StatusCode, resp.Header.Get("Idempotent-Replayed")))
	}
	t.Logf("early answers: %v, executions %d", answers, early.runs())
	if early.runs() != 1 || answers[0] != "200 replayed=" || answers[1] != "200 replayed=true" || answers[2] != "200 replayed=true" {
		t.Fatalf("answers %v, executions %d; want one run, then replays", answers, early.runs())
	}

	// Idle sockets: headers, then nothing.
	idle := startServe(t, serveOpts{
		store: "sqlite:" + filepath.Join(t.TempDir(), "idle.db"), upstream: s.URL,
		config: "senders:\n  - name: shop\n    match: { path: /hooks/shop }\n    key: [ { body: id } ]\n",
	})
	addr := strings.TrimPrefix(idle.URL, "http://")
	for i := range 300 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "POST /hooks/shop HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 1000+i)
	}
	time.Sleep(300 * time.Millisecond)
	r := post(client, idle.URL+"/hooks/shop", `{"id":"among-idle"}`)
	t.Logf("among 300 idle sockets: %s, executions %d", r, s.Executions("among-idle"))
	if !r.ok() || s.Executions("among-idle") != 1 {
		t.Fatalf("a delivery among idle sockets: %s, executions %d; want it run once", r, s.Executions("among-idle"))
	}
}

// Sockets that declare a full max_body, send 16 KiB and one byte more,
// then stall (about 4 MiB of traffic in all, no signature): what each
// holds grows with what it sent, so a webhook is still served among 256
// of them and the process stays far below the body budget (256 × 1 MiB).
// Before, each reserved its declared 1 MiB once its 16 KiB had arrived:
// every webhook got 503 until body_timeout.
func TestStalledSocketsHoldWhatTheySent(t *testing.T) {
	needBinary(t)
	s := newSite(t, nil)
	p := startServe(t, serveOpts{
		store: "sqlite:" + filepath.Join(t.TempDir(), "stalled.db"), upstream: s.URL,
		config: "max_body: 1MiB\nsenders:\n  - name: shop\n    match: { path: /hooks/shop }\n    key: [ { body: id } ]\n",
	})
	addr := strings.TrimPrefix(p.URL, "http://")
	before := procStatus(t, p.Pid(), "VmRSS")
	chunk := strings.Repeat("x", 16<<10+1)
	for range 256 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "POST /hooks/shop HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", 1<<20, chunk)
	}
	time.Sleep(time.Second) // every socket's 16 KiB + 1 has been read
	client := newClient(t, 30*time.Second)
	r := post(client, p.URL+"/hooks/shop", `{"id":"among-stalled"}`)
	rss := procStatus(t, p.Pid(), "VmRSS")
	t.Logf("among 256 stalled sockets: %s, executions %d; RSS %d MiB before, %d MiB with them open", r, s.Executions("among-stalled"), before>>20, rss>>20)
	if !r.ok() || s.Executions("among-stalled") != 1 {
		t.Fatalf("a delivery among stalled sockets: %s, executions %d; want it run once", r, s.Executions("among-stalled"))
	}
	// 256 × 32 KiB held is 8 MiB; the declared lengths would be 256 MiB.
	if grown := rss - before; grown > 64<<20 {
		t.Fatalf("RSS grew by %d MiB with 256 stalled sockets open, want well under the 256 MiB they declared", grown>>20)
	}
}

// earlySite answers 200 from the request's headers and closes without
// reading the body, counting its runs.
type earlySite struct {
	*httptest.Server
	mu sync.Mutex
	n  int
}

func newEarlySite(t *testing.T) *earlySite {
	e := &earlySite{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.n++
		e.mu.Unlock()
		w.Header().Set("Connection", "close")
		fmt.Fprintf(w, `{"ok":true,"id":%q}`, r.Header.Get("X-Event-Id"))
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *earlySite) runs() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}
