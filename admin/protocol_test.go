package admin_test

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/view"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

const (
	githubSecret = "gh-webhook-secret-DO-NOT-LOG-7f3a9c"
	senderAuth   = "Bearer sender-credential-DO-NOT-LOG-51be"
)

// protocolConfig: a signed GitHub sender that keeps request bodies (so
// conflicts say what changed), and an unsigned shop that holds ambiguous
// outcomes for an operator.
const protocolConfig = `
max_body: 64KiB
senders:
  - name: github
    preset: github
    match: { path: /hooks/github }
    signature: { secret_env: HOOKONCE_TEST_GITHUB_SECRET }
    store_request_body: true
    wait_timeout: 20s
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
    ambiguous: hold
    upstream_timeout: 300ms
`

// protocolSite answers like a webhook handler: "fail-once-" ids fail with 500
// the first time, "slow-" ids take 300ms, "hang-" ids outlast the shop's
// upstream_timeout the first time. Answers carry a marker that must never
// reach a log.
func protocolSite() http.HandlerFunc {
	var mu sync.Mutex
	seen := map[string]int{}
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := proxytest.EventID(r, body)
		mu.Lock()
		seen[id]++
		n := seen[id]
		mu.Unlock()
		switch {
		case strings.HasPrefix(id, "fail-once-") && n == 1:
			http.Error(w, "database is locked", http.StatusInternalServerError)
			return
		case strings.HasPrefix(id, "slow-"):
			time.Sleep(300 * time.Millisecond)
		case strings.HasPrefix(id, "hang-") && n == 1:
			time.Sleep(1500 * time.Millisecond)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Order", "order-for-"+id)
		w.Header().Set("Set-Cookie", "session=site-cookie")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":"created","event":%q,"receipt":"RESPONSE-MARKER-%s","at":%d}`, id, id, time.Now().UnixNano())
	}
}

// protocol drives one proxy and records everything a log must not show.
type protocol struct {
	t         *testing.T
	proxyURL  string
	run       string
	mu        sync.Mutex
	forbidden []string
}

func (p *protocol) forbid(s ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forbidden = append(p.forbidden, s...)
}

func sign(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// github posts a signed GitHub delivery; delivery "" sends no delivery id.
func (p *protocol) github(delivery, body, secret string) proxytest.Reply {
	p.t.Helper()
	sig := sign(secret, body)
	p.forbid(body, sig, strings.TrimPrefix(sig, "sha256="))
	h := []string{"X-Hub-Signature-256", sig, "X-GitHub-Event", "push", "Authorization", senderAuth}
	if delivery != "" {
		h = append(h, "X-GitHub-Delivery", delivery)
	}
	r := proxytest.Post(p.t, p.proxyURL+"/hooks/github", body, h...)
	p.forbid(string(r.Body))
	return r
}

func (p *protocol) shop(body string) proxytest.Reply {
	p.t.Helper()
	p.forbid(body)
	r := proxytest.Post(p.t, p.proxyURL+"/hooks/shop", body, "Authorization", senderAuth)
	if r.Status != http.StatusConflict && r.Status < 500 {
		p.forbid(string(r.Body))
	}
	return r
}

// githubBody is a push payload whose marker must never reach a log.
func githubBody(id string, amount, n int) string {
	return fmt.Sprintf(`{"id":%q,"amount":%d,"card":"BODY-MARKER-%s-%d","repository":{"full_name":"acme/shop"}}`, id, amount, id, n)
}

type outcomeKey struct{ sender, outcome string }

// TestProtocolMetricsAPIAndLogs runs the acceptance protocol with a signed
// sender through a real proxy, then checks what an operator sees: the
// counts per outcome on /metrics, the stored answers byte-for-byte on the
// API, a stuck claim released through the API, and logs with one line per
// decision that never show the secret, a signature, an Authorization header
// or a body.
func TestProtocolMetricsAPIAndLogs(t *testing.T) {
	t.Setenv("HOOKONCE_TEST_GITHUB_SECRET", githubSecret)
	store := openStore(t)
	site := proxytest.NewSite(t, protocolSite())
	px := proxytest.Start(t, store, site.URL, protocolConfig)
	adminLogs := &proxytest.SyncBuffer{}
	h, err := admin.New(admin.Options{Store: store, Gatherer: px.Registry, Token: testToken,
		Logger: slog.New(slog.NewJSONHandler(adminLogs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	adm := httptest.NewServer(h)
	t.Cleanup(adm.Close)

	p := &protocol{t: t, proxyURL: px.URL, run: fmt.Sprint(time.Now().UnixNano())}
	p.forbid(githubSecret, senderAuth, strings.TrimPrefix(senderAuth, "Bearer "), "RESPONSE-MARKER", "BODY-MARKER", "site-cookie")
	want := map[outcomeKey]float64{}
	expect := func(t *testing.T, got proxytest.Reply, status int, replayed bool) {
		t.Helper()
		if got.Status != status || got.Replayed() != replayed {
			t.Fatalf("answer %d replayed=%v %s; want %d replayed=%v", got.Status, got.Replayed(), got.Body, status, replayed)
		}
	}

	d1 := "d1-" + p.run
	var first proxytest.Reply
	t.Run("new delivery processed", func(t *testing.T) {
		first = p.github(d1, githubBody(d1, 100, 1), githubSecret)
		expect(t, first, 201, false)
		want[outcomeKey{"github", proxy.OutcomeProcessed}]++
	})
	t.Run("exact repeat replayed", func(t *testing.T) {
		again := p.github(d1, githubBody(d1, 100, 1), githubSecret)
		expect(t, again, 201, true)
		if !bytes.Equal(again.Body, first.Body) {
			t.Fatalf("replayed %q, want %q", again.Body, first.Body)
		}
		want[outcomeKey{"github", proxy.OutcomeDuplicate}]++
	})
	t.Run("changed payload is a conflict", func(t *testing.T) {
		expect(t, p.github(d1, githubBody(d1, 999, 1), githubSecret), 422, false)
		want[outcomeKey{"github", proxy.OutcomeConflict}]++
	})
	t.Run("site failure released, retry processed", func(t *testing.T) {
		id := "fail-once-" + p.run
		b := githubBody(id, 5, 2)
		expect(t, p.github(id, b, githubSecret), 500, false)
		expect(t, p.github(id, b, githubSecret), 201, false)
		expect(t, p.github(id, b, githubSecret), 201, true)
		want[outcomeKey{"github", proxy.OutcomeReleased}]++
		want[outcomeKey{"github", proxy.OutcomeProcessed}]++
		want[outcomeKey{"github", proxy.OutcomeDuplicate}]++
	})
	t.Run("parallel deliveries run once", func(t *testing.T) {
		id := "slow-" + p.run
		b := githubBody(id, 7, 3)
		const n = 10
		var wg sync.WaitGroup
		replies := make([]proxytest.Reply, n)
		for i := range replies {
			wg.Go(func() { replies[i] = p.github(id, b, githubSecret) })
		}
		wg.Wait()
		replayed := 0
		for _, r := range replies {
			if r.Status != 201 {
				t.Fatalf("parallel answer %d %s", r.Status, r.Body)
			}
			if r.Replayed() {
				replayed++
			}
		}
		if replayed != n-1 || site.Executions(id) != 1 {
			t.Fatalf("%d replayed, %d executions; want %d and 1", replayed, site.Executions(id), n-1)
		}
		want[outcomeKey{"github", proxy.OutcomeProcessed}]++
		want[outcomeKey{"github", proxy.OutcomeDuplicate}] += n - 1
	})
	t.Run("bad signature refused", func(t *testing.T) {
		id := "forged-" + p.run
		expect(t, p.github(id, githubBody(id, 1, 4), "not-the-secret"), 401, false)
		if site.Executions(id) != 0 {
			t.Fatal("a forged delivery reached the site")
		}
		want[outcomeKey{"github", proxy.OutcomeRejectedSignature}]++
	})
	t.Run("missing delivery id refused", func(t *testing.T) {
		expect(t, p.github("", githubBody("nokey-"+p.run, 1, 5), githubSecret), 400, false)
		want[outcomeKey{"github", proxy.OutcomeMissingKey}]++
	})
	t.Run("too large refused", func(t *testing.T) {
		big := `{"id":"big","pad":"` + strings.Repeat("BODY-MARKER-", 6000) + `"}`
		expect(t, p.github("big-"+p.run, big, githubSecret), 413, false)
		want[outcomeKey{"github", proxy.OutcomeTooLarge}]++
	})

	hang := "hang-" + p.run
	hangBody := fmt.Sprintf(`{"id":%q,"card":"BODY-MARKER-hang"}`, hang)
	t.Run("ambiguous outcome held, then released through the API", func(t *testing.T) {
		expect(t, p.shop(hangBody), 504, false)
		want[outcomeKey{"shop", proxy.OutcomeAmbiguous}]++
		expect(t, p.shop(hangBody), 409, false)
		want[outcomeKey{"shop", proxy.OutcomeInProgress}]++
		r := do(t, http.MethodGet, adm.URL+"/v1/events/shop/"+hang, testToken)
		if r.status != 200 || !bytes.Contains(r.body, []byte(`"state": "unknown"`)) {
			t.Fatalf("held record: %d %s", r.status, r.body)
		}
		if r := do(t, http.MethodDelete, adm.URL+"/v1/events/shop/"+hang, testToken); r.status != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", r.status, r.body)
		}
		expect(t, p.shop(hangBody), 201, false)
		want[outcomeKey{"shop", proxy.OutcomeProcessed}]++
		if n := site.Executions(hang); n != 2 {
			t.Fatalf("site ran %d times, want 2 (the ambiguous one and the one after release)", n)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("metrics count every outcome", func(t *testing.T) {
		fams := scrape(t, adm.URL+"/metrics")
		got := map[outcomeKey]float64{}
		for _, m := range fams["hookonce_requests_total"].GetMetric() {
			got[outcomeKey{label(m, "sender"), label(m, "outcome")}] = m.GetCounter().GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("hookonce_requests_total{sender=%q,outcome=%q} = %v, want %v", k.sender, k.outcome, got[k], v)
			}
		}
		for k, v := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected hookonce_requests_total{sender=%q,outcome=%q} = %v", k.sender, k.outcome, v)
			}
		}
		forwards := map[string]uint64{"github": 4, "shop": 2} // d1, fail-once twice, slow; hang twice
		for _, m := range fams["hookonce_upstream_duration_seconds"].GetMetric() {
			s := label(m, "sender")
			if c := m.GetHistogram().GetSampleCount(); c != forwards[s] {
				t.Errorf("hookonce_upstream_duration_seconds_count{sender=%q} = %d, want %d", s, c, forwards[s])
			}
			delete(forwards, s)
		}
		if len(forwards) != 0 {
			t.Errorf("no upstream histogram for %v", forwards)
		}
		ops := map[string]bool{}
		for _, m := range fams["hookonce_store_duration_seconds"].GetMetric() {
			if m.GetHistogram().GetSampleCount() > 0 {
				ops[label(m, "op")] = true
			}
		}
		for _, op := range []string{"claim", "complete", "release", "hold", "record_conflict"} {
			if !ops[op] {
				t.Errorf("no hookonce_store_duration_seconds{op=%q} samples (have %v)", op, ops)
			}
		}
		if g := fams["hookonce_inflight"].GetMetric(); len(g) != 1 || g[0].GetGauge().GetValue() != 0 {
			t.Errorf("hookonce_inflight = %v, want 0", g)
		}
	})

	t.Run("API shows the stored answer byte for byte", func(t *testing.T) {
		var rec view.RecordJSON
		deadline := time.Now().Add(5 * time.Second)
		for { // replay counts are written in batches
			r := do(t, http.MethodGet, adm.URL+"/v1/events/github/"+d1, testToken)
			if err := json.Unmarshal(r.body, &rec); err != nil || r.status != 200 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			if rec.Hits >= 1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if rec.State != dedupe.StateDone || rec.Hits != 1 || rec.Response == nil || rec.Response.Status != 201 {
			t.Fatalf("record = %+v", rec)
		}
		raw, _ := base64.StdEncoding.DecodeString(rec.Response.BodyBase64)
		if !bytes.Equal(raw, first.Body) || rec.Response.BodyText == nil || *rec.Response.BodyText != string(first.Body) {
			t.Fatalf("stored body %q / %v, want %q", raw, rec.Response.BodyText, first.Body)
		}
		if rec.Response.Headers["X-Order"][0] != "order-for-"+d1 || rec.Response.Headers["Set-Cookie"] != nil {
			t.Fatalf("stored headers %v", rec.Response.Headers)
		}
	})

	t.Run("conflicts say what changed", func(t *testing.T) {
		r := do(t, http.MethodGet, adm.URL+"/v1/conflicts?sender=github", testToken)
		var cs []view.ConflictJSON
		if err := json.Unmarshal(r.body, &cs); err != nil || len(cs) != 1 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if cs[0].Key != d1 || strings.Join(cs[0].ChangedPaths, ",") != "amount" || cs[0].StoredSHA256 == cs[0].ReceivedSHA256 {
			t.Fatalf("conflict = %+v; want key %s, changed [amount]", cs[0], d1)
		}
	})

	t.Run("one log line per decision, nothing secret", func(t *testing.T) {
		logs := px.Logs.String()
		got := map[outcomeKey]float64{}
		sc := bufio.NewScanner(strings.NewReader(logs))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line map[string]any
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("log line is not JSON: %s", sc.Text())
			}
			if line["msg"] != "webhook" {
				continue
			}
			for _, field := range []string{"sender", "key", "outcome", "status", "duration_ms"} {
				if _, ok := line[field]; !ok {
					t.Errorf("decision line without %s: %s", field, sc.Text())
				}
			}
			if line["outcome"] == proxy.OutcomeProcessed {
				if _, ok := line["upstream_status"]; !ok {
					t.Errorf("processed line without upstream_status: %s", sc.Text())
				}
			}
			got[outcomeKey{fmt.Sprint(line["sender"]), fmt.Sprint(line["outcome"])}]++
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%v decision lines for %v, want %v", got[k], k, v)
			}
		}
		if !strings.Contains(logs, d1) || !strings.Contains(adminLogs.String(), hang) {
			t.Fatal("the logs do not name the keys: the scan below would prove nothing")
		}
		all := logs + adminLogs.String()
		p.forbid(testToken)
		for _, s := range p.forbidden {
			if s != "" && strings.Contains(all, s) {
				t.Errorf("the logs contain %.60q", s)
			}
		}
		if t.Failed() {
			t.Logf("proxy log:\n%s", logs)
		}
	})
}

// scrape reads /metrics in the text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	r := do(t, http.MethodGet, url, testToken)
	if r.status != 200 {
		t.Fatalf("metrics: %d", r.status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("parse metrics: %v", err)
	}
	return fams
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
