package probe_test

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/probe"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

const presetSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // a Standard Webhooks secret suits every preset

// Every preset the probe claims, each on its own path behind one hookonce.
const presetsConfig = `
senders:
  - { name: robokassa, preset: robokassa, match: { path: /robokassa/result.php }, signature: { secret_env: PROBE_PRESET_SECRET } }
  - { name: tbank, preset: tbank, match: { path: /tbank/notify.php }, signature: { secret_env: PROBE_PRESET_SECRET } }
  - { name: rbs, preset: rbs, match: { path: /rbs/callback.php }, signature: { secret_env: PROBE_PRESET_SECRET } }
  - { name: cloudpayments, preset: cloudpayments, match: { path: /bitrix/tools/sale_ps_result.php }, signature: { secret_env: PROBE_PRESET_SECRET } }
  - { name: telegram, preset: telegram, match: { path: /tg/hook.php }, signature: { secret_env: PROBE_PRESET_SECRET } }
  - { name: paykeeper, preset: paykeeper, match: { path: /paykeeper/result.php }, signature: { secret_env: PROBE_PRESET_SECRET } }
  - { name: cdek, preset: cdek, match: { path: /cdek/hook.php }, signature: { secret_env: PROBE_PRESET_SECRET } }
  - { name: stripe, preset: stripe, match: { path: /stripe }, signature: { secret_env: PROBE_PRESET_SECRET } }
  - { name: github, preset: github, match: { path: /github }, signature: { secret_env: PROBE_PRESET_SECRET } }
  - { name: shopify, preset: shopify, match: { path: /shopify }, signature: { secret_env: PROBE_PRESET_SECRET } }
  - { name: standard-webhooks, preset: standard-webhooks, match: { path: /svix }, signature: { secret_env: PROBE_PRESET_SECRET } }
  - { name: slack, preset: slack, match: { path: /slack }, signature: { secret_env: PROBE_PRESET_SECRET } }
  - { name: paddle, preset: paddle, match: { path: /paddle }, signature: { secret_env: PROBE_PRESET_SECRET } }
  - { name: hmac-sha256, match: { path: /hmac }, key: [ { body: id } ], signature: { scheme: hmac-sha256, header: X-Signature, secret_env: PROBE_PRESET_SECRET } }
`

var presetPaths = map[string]string{
	"robokassa": "/robokassa/result.php", "tbank": "/tbank/notify.php", "rbs": "/rbs/callback.php",
	"cloudpayments": "/bitrix/tools/sale_ps_result.php", "telegram": "/tg/hook.php",
	"paykeeper": "/paykeeper/result.php", "cdek": "/cdek/hook.php", "stripe": "/stripe", "github": "/github",
	"shopify": "/shopify", "standard-webhooks": "/svix", "slack": "/slack", "hmac-sha256": "/hmac", "paddle": "/paddle",
}

func md5hex(s string) string { h := md5.Sum([]byte(s)); return hex.EncodeToString(h[:]) }

// shopSite is a counting sandbox shop: it reads each delivery's event id
// where that sender's handler reads it, counts one execution per call,
// and answers as the handler does (answer overrides it when set).
type shopSite struct {
	mu     sync.Mutex
	runs   map[string]int // path + " " + event id
	answer func(w http.ResponseWriter, path, id string) bool
}

func eventOf(r *http.Request, body []byte) string {
	for _, h := range []string{"X-GitHub-Delivery", "X-Shopify-Event-Id", "Webhook-Id"} {
		if v := r.Header.Get(h); v != "" {
			return v
		}
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		f, _ := url.ParseQuery(string(body))
		for _, k := range []string{"InvId", "mdOrder", "TransactionId", "data[FIELDS][ID]", "id"} {
			if v := f.Get(k); v != "" {
				return v
			}
		}
		return ""
	}
	var doc map[string]any
	_ = json.Unmarshal(body, &doc)
	for _, k := range []string{"PaymentId", "update_id", "uuid", "event_id", "id"} {
		if v, ok := doc[k]; ok {
			b, _ := json.Marshal(v)
			return strings.Trim(string(b), `"`)
		}
	}
	return ""
}

func (s *shopSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id := eventOf(r, body)
	s.mu.Lock()
	s.runs[r.URL.Path+" "+id]++
	answer := s.answer
	s.mu.Unlock()
	time.Sleep(50 * time.Millisecond) // parallel deliveries overlap at the handler
	if answer != nil && answer(w, r.URL.Path, id) {
		return
	}
	switch r.URL.Path {
	case "/robokassa/result.php":
		_, _ = io.WriteString(w, "OK"+id+"\n")
	case "/tbank/notify.php":
		_, _ = io.WriteString(w, "OK")
	case "/paykeeper/result.php":
		_, _ = io.WriteString(w, "OK "+md5hex(id+presetSecret))
	case "/bitrix/tools/sale_ps_result.php":
		_, _ = io.WriteString(w, `{"code":0}`)
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true,"at":"`+time.Now().Format(time.RFC3339Nano)+`"}`)
	}
}

// answerOn makes the handler on path answer status and body from now on.
func (s *shopSite) answerOn(path string, status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = func(w http.ResponseWriter, p, _ string) bool {
		if p != path {
			return false
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
		return true
	}
}

// executions returns the site's runs on path, by event id.
func (s *shopSite) executions(path string) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, n := range s.runs {
		if p, id, _ := strings.Cut(k, " "); p == path {
			out[id] = n
		}
	}
	return out
}

type presetDeployment struct {
	site  *shopSite
	store dedupe.Store
	proxy *proxytest.Instance
	admin string
}

func startPresetDeployment(t *testing.T) *presetDeployment {
	t.Helper()
	t.Setenv("PROBE_PRESET_SECRET", presetSecret)
	d := &presetDeployment{site: &shopSite{runs: map[string]int{}}, store: newStore(t)}
	up := httptest.NewServer(d.site)
	t.Cleanup(up.Close)
	d.proxy = proxytest.Start(t, d.store, up.URL, presetsConfig)
	h, err := admin.New(admin.Options{Store: d.store, Token: "adm"})
	if err != nil {
		t.Fatal(err)
	}
	adm := httptest.NewServer(h)
	t.Cleanup(adm.Close)
	d.admin = adm.URL
	return d
}

func (d *presetDeployment) probe(t *testing.T, preset, secret string) (*probe.Result, string) {
	t.Helper()
	return runProbe(t, probe.Config{Target: d.proxy.URL, Path: presetPaths[preset], Sender: preset,
		Scheme: preset, Secret: secret, Admin: d.admin, AdminToken: "adm", Parallel: 5})
}

// TestProbeEveryPreset: the probe passes against a real hookonce for
// every preset it claims, and each of its two events ran exactly once at
// the shop's handler (the conflicting body not at all); with the admin API
// it counted the records and released them.
func TestProbeEveryPreset(t *testing.T) {
	d := startPresetDeployment(t)
	if got, want := len(probe.SchemeNames()), len(presetPaths); got != want {
		t.Fatalf("the probe claims %d presets (%v), this test covers %d", got, probe.SchemeNames(), want)
	}
	for _, preset := range probe.SchemeNames() {
		t.Run(preset, func(t *testing.T) {
			res, out := d.probe(t, preset, presetSecret)
			t.Logf("table:\n%s", out)
			if !res.Passed() || strings.Contains(out, "FAIL") {
				t.Fatalf("probe failed against hookonce:\n%s\nlogs:\n%s", out, d.proxy.Logs.String())
			}
			runs := d.site.executions(presetPaths[preset])
			if len(runs) != 2 {
				t.Errorf("the site saw events %v, want the probe's new and parallel ones", runs)
			}
			for id, n := range runs {
				want := 1
				if preset == "cdek" && strings.HasSuffix(id, "-new") {
					want = 2 // the other body under the new event's key is an event of its own
				}
				if n != want {
					t.Errorf("event %s ran %d times at the site, want %d", id, n, want)
				}
			}
			if !res.Released {
				t.Error("the probe did not release its events")
			}
			recs, err := d.store.List(t.Context(), dedupe.ListFilter{Sender: preset})
			if err != nil || len(recs) != 0 {
				t.Errorf("records left after the probe: %d %v", len(recs), err)
			}
		})
	}
}

// TestProbeFailsAgainstARefusingDeployment: a wrong secret (401), a
// handler that answers 403, and one that answers 200 without the preset's
// success answer all fail the probe; none prints PASS for the new event.
func TestProbeFailsAgainstARefusingDeployment(t *testing.T) {
	d := startPresetDeployment(t)
	for _, preset := range []string{"robokassa", "paykeeper", "tbank", "cloudpayments", "rbs", "telegram", "cdek", "paddle"} {
		t.Run(preset+"/WrongSecret", func(t *testing.T) {
			before := d.site.executions(presetPaths[preset])
			res, out := d.probe(t, preset, "not-the-secret")
			if res.Passed() {
				t.Fatalf("probe passed with the wrong secret:\n%s", out)
			}
			if row := rowsByCheck(res)["new event"]; row.Pass || !strings.HasPrefix(row.Observed, "401") {
				t.Errorf("new event row = %+v, want a 401 FAIL", row)
			}
			if after := d.site.executions(presetPaths[preset]); len(after) != len(before) {
				t.Errorf("unsigned deliveries reached the site: %v", after)
			}
		})
	}
	t.Run("Forbidden", func(t *testing.T) {
		d.site.answerOn("/robokassa/result.php", http.StatusForbidden, "forbidden")
		res, out := d.probe(t, "robokassa", presetSecret)
		t.Logf("table:\n%s", out)
		if res.Passed() {
			t.Fatalf("probe passed against a handler that answers 403:\n%s", out)
		}
		for _, row := range res.Rows {
			if strings.Contains(row.Observed, "403") && row.Pass {
				t.Errorf("row %q passed on a 403: %+v", row.Check, row)
			}
		}
		if row := rowsByCheck(res)["new event"]; row.Pass || !strings.HasPrefix(row.Observed, "403") {
			t.Errorf("new event row = %+v, want a 403 FAIL", row)
		}
	})
	t.Run("NotTheSuccessAnswer", func(t *testing.T) {
		d.site.answerOn("/paykeeper/result.php", http.StatusOK, "Error! Hash mismatch")
		res, out := d.probe(t, "paykeeper", presetSecret)
		t.Logf("table:\n%s", out)
		if res.Passed() {
			t.Fatalf("probe passed against a handler that never applies the payment:\n%s", out)
		}
		if row := rowsByCheck(res)["new event: success answer"]; row.Pass {
			t.Errorf("success row = %+v, want FAIL", row)
		}
	})
}

// TestProbeRefusesWhatItCannotTest: the presets the probe cannot stand in
// for are refused by name, before anything is sent.
func TestProbeRefusesWhatItCannotTest(t *testing.T) {
	for preset, want := range map[string]string{
		"yookassa":     "network address",
		"woocommerce":  "no event id",
		"bitrix24":     "without dedupe",
		"paypal":       "private key",
		"yandex-pay":   "private keys",
		"mollie":       "without dedupe",
		"lemonsqueezy": "want one of",
	} {
		err := (&probe.Config{Target: "http://127.0.0.1:1", Sender: "s", Scheme: preset, Secret: "x"}).Validate()
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), preset) {
			t.Errorf("%s: %v, want a refusal naming it (%q)", preset, err, want)
		}
	}
	for _, tc := range []struct {
		cfg  probe.Config
		want string
	}{
		{probe.Config{Target: "http://x", Sender: "s", Scheme: "robokassa"}, "needs --secret"},
		{probe.Config{Target: "http://x", Sender: "s", Scheme: "paykeeper", Secret: "x", KeyField: "id"}, "do not apply"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
