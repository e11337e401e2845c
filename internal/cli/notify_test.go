package cli

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookonce/hookonce/dedupe/readiness"
	"github.com/hookonce/hookonce/internal/testkit/smtptest"
	"github.com/hookonce/hookonce/notify"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

const (
	notifyWhsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	notifyBot   = "777:AAtest-token"
)

// hookReceiver stands in for Telegram's Bot API or a webhook receiver:
// it keeps each request taken, answers fail (when set) or hangs while
// hang is open.
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	heads  []http.Header
	paths  []string
	fail   atomic.Int64
	hang   chan struct{}
	hung   atomic.Int64 // requests that waited on hang
}

func newHookReceiver(t *testing.T, answer string) *hookReceiver {
	rc := &hookReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		hang := rc.hang
		rc.mu.Unlock()
		if hang != nil {
			rc.hung.Add(1)
			select {
			case <-hang:
			case <-r.Context().Done():
				return
			}
		}
		body, _ := io.ReadAll(r.Body)
		if rc.fail.Load() > 0 {
			rc.fail.Add(-1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rc.mu.Lock()
		rc.bodies, rc.heads, rc.paths = append(rc.bodies, body), append(rc.heads, r.Header.Clone()), append(rc.paths, r.URL.Path)
		rc.mu.Unlock()
		io.WriteString(w, answer)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// texts returns the message texts taken, by kind (the webhook's data.kind;
// for Telegram, "" with the text).
func (rc *hookReceiver) texts(t *testing.T) map[string][]string {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string][]string{}
	for i, b := range rc.bodies {
		var v struct {
			Text string `json:"text"`
			Data struct {
				Kind string `json:"kind"`
				Text string `json:"text"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("a notice that is not JSON: %s", b)
		}
		if v.Data.Kind != "" {
			wh, _ := standardwebhooks.NewWebhook(notifyWhsec)
			if err := wh.Verify(b, rc.heads[i]); err != nil {
				t.Fatalf("webhook notice does not verify with standardwebhooks: %v", err)
			}
			out[v.Data.Kind] = append(out[v.Data.Kind], v.Data.Text)
			continue
		}
		out[""] = append(out[""], v.Text)
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func notifyConfig(webhook, telegram string, mail *smtptest.Server) string {
	return fmt.Sprintf(`senders:
  - name: shop
    match: { path: /hook }
    key: [ { header: X-Event-Id } ]
    signature: { scheme: hmac-sha256, header: X-Signature, secret_env: NOTIFY_TEST_SECRET }
    ambiguous: hold
    upstream_timeout: 300ms
    retry_window: 1s
    store_request_body: true
notify:
  webhook: { url: %q, secret_env: NOTIFY_TEST_WHSEC }
  telegram: { token_env: NOTIFY_TEST_BOT, chat_id: 42, api_url: %q }
  email: { smtp: %q, from: hookonce@shop.example, to: [owner@shop.example], password_env: NOTIFY_TEST_SMTP, ca_file: %q }
  digest_wait: 2s
  interval: 1h
`, webhook, telegram, mail.Addr, mail.CAFile)
}

func signed(id, body string) []string {
	mac := hmac.New(sha256.New, []byte("shop-secret"))
	mac.Write([]byte(body))
	return []string{"X-Event-Id", id, "X-Signature", hex.EncodeToString(mac.Sum(nil))}
}

// serve with a notify: block, its three channels local: a burst of 50
// refused signatures, a held event, the same event unretried, and a
// refused reload each make one message on every channel, naming the
// command to run; the webhook verifies with a Standard Webhooks library.
// Meanwhile the webhook receiver hangs and Telegram fails: deliveries
// complete regardless (counted at the site), and Telegram's messages come
// on a retry.
func TestServeNotifies(t *testing.T) {
	t.Setenv("NOTIFY_TEST_SECRET", "shop-secret")
	t.Setenv("NOTIFY_TEST_WHSEC", notifyWhsec)
	t.Setenv("NOTIFY_TEST_BOT", notifyBot)
	t.Setenv("NOTIFY_TEST_SMTP", "mail-pass")
	hold := make(chan struct{})
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Event-Id") == "h1" {
			select { // past upstream_timeout: an ambiguous outcome, held
			case <-hold:
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, "OK")
	})
	defer close(hold)
	hook := newHookReceiver(t, "")
	tg := newHookReceiver(t, `{"ok":true}`)
	mail := smtptest.Start(t)
	hang := make(chan struct{})
	hook.hang = hang
	tg.fail.Store(3)

	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "hookonce.yaml")
	good := notifyConfig(hook.URL, tg.URL, mail)
	writeFile(t, cfgFile, good)
	cfg := DefaultConfig()
	cfg.ConfigPath, cfg.Upstream, cfg.Store = cfgFile, site.URL, "sqlite:"+filepath.Join(dir, "h.db")
	cfg.Listen, cfg.AdminListen, cfg.UnretriedEvery = "127.0.0.1:0", "127.0.0.1:0", 100*time.Millisecond
	logs := &proxytest.SyncBuffer{}
	m := NewMain(cfg, "test", logs)
	m.notifyBackoff = 50 * time.Millisecond
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	url := "http://" + m.Addr().String() + "/hook"

	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"n":%d}`, i)
			if st := proxytest.Post(t, url, body, "X-Event-Id", fmt.Sprint("bad", i), "X-Signature", strings.Repeat("0", 64)).Status; st != 401 {
				t.Errorf("bad signature answered %d", st)
			}
		}()
	}
	wg.Wait()
	if st := proxytest.Post(t, url, `{}`, signed("h1", `{}`)...).Status; st != http.StatusGatewayTimeout && st != http.StatusBadGateway {
		t.Fatalf("a delivery past upstream_timeout answered %d", st)
	}
	// While the webhook receiver hangs on the notices, deliveries go on.
	for i := range 20 {
		id := fmt.Sprint("ok", i)
		if st := proxytest.Post(t, url, `{}`, signed(id, `{}`)...).Status; st != 200 || site.Executions(id) != 1 {
			t.Fatalf("delivery %s answered %d, ran %d times", id, st, site.Executions(id))
		}
	}
	waitFor(t, "a notice at the hanging webhook", func() bool { return hook.hung.Load() > 0 })
	for i := range 20 { // and go on while a notice is stuck there
		id := fmt.Sprint("more", i)
		if st := proxytest.Post(t, url, `{}`, signed(id, `{}`)...).Status; st != 200 || site.Executions(id) != 1 {
			t.Fatalf("delivery %s answered %d, ran %d times", id, st, site.Executions(id))
		}
	}
	close(hang)

	// The held event's sender never retries it: unretried after 1s.
	waitFor(t, "held and unretried notices on the webhook", func() bool {
		k := hook.texts(t)
		return len(k["held"]) > 0 && len(k["unretried"]) > 0 && len(k["refused"]) > 0
	})
	writeFile(t, cfgFile, good+"  nonsense: 1\n")
	m.Reload()
	waitFor(t, "the reload notice", func() bool { return len(hook.texts(t)["reload_failed"]) > 0 })
	waitFor(t, "four notices by Telegram and email", func() bool { return len(tg.texts(t)[""]) >= 4 && len(mail.Messages()) >= 4 })
	time.Sleep(300 * time.Millisecond) // nothing more comes

	k := hook.texts(t)
	want := map[string][]string{
		"refused":       {"shop: 50 refused in ", "the signature did not verify (401)", "hookonce check --request FILE"},
		"held":          {"Key: h1", "hookonce lookup shop h1", "hookonce release shop h1"},
		"unretried":     {"Key: h1", "hookonce redeliver shop h1"},
		"reload_failed": {"hookonce check --config " + cfgFile, "nonsense"},
	}
	for kind, phrases := range want {
		if len(k[kind]) != 1 {
			t.Errorf("%d %s notices on the webhook, want 1", len(k[kind]), kind)
			continue
		}
		for _, p := range phrases {
			if !strings.Contains(k[kind][0], p) {
				t.Errorf("%s notice lacks %q:\n%s", kind, p, k[kind][0])
			}
		}
	}
	if len(k) != 4 {
		t.Errorf("webhook notices of kinds %v, want 4 kinds", k)
	}
	if n := len(tg.texts(t)[""]); n != 4 {
		t.Errorf("%d Telegram messages, want 4", n)
	}
	if n := len(mail.Messages()); n != 4 {
		t.Errorf("%d mails, want 4", n)
	}
	for _, p := range tg.paths {
		if p != "/bot"+notifyBot+"/sendMessage" {
			t.Errorf("Telegram request to %s", p)
		}
	}
	_, metrics := httpGet(t, "http://"+m.AdminAddr().String()+"/metrics", "")
	if !strings.Contains(metrics, `hookonce_notify_failures_total{channel="telegram"} 3`) ||
		!strings.Contains(metrics, `hookonce_notify_failures_total{channel="email"} 0`) {
		t.Errorf("failures metric:\n%s", grepLines(metrics, "hookonce_notify"))
	}
	for _, secret := range []string{notifyBot, "mail-pass", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "shop-secret"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("the log holds a secret (%q)", secret)
		}
	}
	if site.Executions("h1") != 1 {
		t.Fatalf("the held event ran %d times", site.Executions("h1"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// hookonce notify test sends through every channel and says which
// worked; one that fails makes it exit 1.
func TestNotifyTestCommand(t *testing.T) {
	t.Setenv("NOTIFY_TEST_WHSEC", notifyWhsec)
	t.Setenv("NOTIFY_TEST_BOT", notifyBot)
	t.Setenv("NOTIFY_TEST_SMTP", "mail-pass")
	t.Setenv("NOTIFY_TEST_SECRET", "shop-secret")
	hook := newHookReceiver(t, "")
	tg := newHookReceiver(t, `{"ok":true}`)
	mail := smtptest.Start(t)
	cfgFile := filepath.Join(t.TempDir(), "hookonce.yaml")
	writeFile(t, cfgFile, notifyConfig(hook.URL, tg.URL, mail))

	out, errOut, code := hookonce(t, "notify", "test", "--config", cfgFile)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{"telegram: sent", "email: sent", "webhook: sent"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if len(hook.texts(t)["test"]) != 1 || len(tg.texts(t)[""]) != 1 || len(mail.Messages()) != 1 {
		t.Fatalf("test messages: webhook %v, telegram %v, mail %d", hook.texts(t), tg.texts(t), len(mail.Messages()))
	}

	tg.fail.Store(1)
	out, errOut, code = hookonce(t, "notify", "test", "--config", cfgFile)
	if code != exitRuntime || !strings.Contains(out, "telegram: failed") || !strings.Contains(out, "webhook: sent") ||
		!strings.Contains(errOut, "1 of 3 channels failed") || strings.Contains(out+errOut, notifyBot) {
		t.Fatalf("with Telegram failing: exit %d\n%s%s", code, out, errOut)
	}

	for _, args := range [][]string{{"notify"}, {"notify", "tset"}} {
		if _, errOut, code := hookonce(t, args...); code != exitUsage || !strings.Contains(errOut, "usage: hookonce notify test") {
			t.Fatalf("hookonce %v: exit %d %s", args, code, errOut)
		}
	}
	bare := filepath.Join(t.TempDir(), "hookonce.yaml")
	writeFile(t, bare, "senders: []\n")
	if _, errOut, code := hookonce(t, "notify", "test", "--config", bare); code != exitUsage || !strings.Contains(errOut, "no notify: block") {
		t.Fatalf("without notify: exit %d %s", code, errOut)
	}
}

// A sender whose readiness verdict goes from ready to not ready is told
// once, with the readiness command; one that was never ready is not; a
// store error of the proxy is a store_failing message.
func TestNoticeReadinessAndStore(t *testing.T) {
	hook := newHookReceiver(t, "")
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(notifyWhsec, "whsec_"))
	m := &Main{}
	m.notifier = notify.New(notify.Options{Channels: []notify.Channel{&notify.Webhook{URL: hook.URL, Secret: key}},
		DigestWait: 50 * time.Millisecond, Interval: time.Hour})
	m.readyWas = map[string]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.notifier.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	report := func(shop, other string) readiness.Report {
		return readiness.Report{Senders: []readiness.SenderReport{
			{Sender: "shop", Verdict: shop, Reason: "2 changed payloads under known ids"},
			{Sender: "other", Verdict: other, Reason: "not enough deliveries"},
		}}
	}
	m.noticeReadiness(report(readiness.GoLive, readiness.NotEnough))
	m.noticeReadiness(report(readiness.NoGo, readiness.NotEnough))
	m.noticeReadiness(report(readiness.NoGo, readiness.NotEnough))
	m.proxyNotice(proxy.Notice{What: proxy.OutcomeStoreError, Sender: "shop", Key: "k1"})
	m.proxyNotice(proxy.Notice{What: proxy.OutcomeStoreError, Sender: "shop", Key: "k2"})
	waitFor(t, "two notices", func() bool { k := hook.texts(t); return len(k["not_ready"]) > 0 && len(k["store_failing"]) > 0 })
	time.Sleep(200 * time.Millisecond)
	k := hook.texts(t)
	if len(k["not_ready"]) != 1 || !strings.Contains(k["not_ready"][0], "shop: 2 changed payloads") ||
		!strings.Contains(k["not_ready"][0], "hookonce readiness --sender shop") || strings.Contains(k["not_ready"][0], "other") {
		t.Fatalf("not_ready notices: %q", k["not_ready"])
	}
	if len(k["store_failing"]) != 1 || !strings.Contains(k["store_failing"][0], "2 deliveries could not be claimed") ||
		!strings.Contains(k["store_failing"][0], "hookonce health --ready") {
		t.Fatalf("store_failing notices: %q", k["store_failing"])
	}
}

// serve with an ack: durable sender whose site keeps answering 503: the
// sender is answered by hookonce, the site is tried twice (the backoff
// 100ms, 1m would put the third try past retry_for, 1m), the delivery is
// given up, and the operator gets one given_up notice naming the commands
// to look at it and to send it again.
func TestServeNotifiesGivenUp(t *testing.T) {
	t.Setenv("NOTIFY_TEST_WHSEC", notifyWhsec)
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	hook := newHookReceiver(t, "")
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "hookonce.yaml")
	writeFile(t, cfgFile, fmt.Sprintf(`senders:
  - name: cdek
    match: { path: /cdek }
    key: [ { body: id } ]
    ack: durable
    ack_answer: { status: 200, body: "OK" }
    retry_for: 1m
notify:
  webhook: { url: %q, secret_env: NOTIFY_TEST_WHSEC }
  digest_wait: 100ms
  interval: 1h
`, hook.URL))
	cfg := DefaultConfig()
	cfg.ConfigPath, cfg.Upstream, cfg.Store = cfgFile, site.URL, "sqlite:"+filepath.Join(dir, "h.db")
	cfg.Listen, cfg.AdminListen, cfg.DurableBackoff = "127.0.0.1:0", "127.0.0.1:0", "100ms,1m"
	m := NewMain(cfg, "test", &proxytest.SyncBuffer{})
	m.notifyBackoff = 50 * time.Millisecond
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	got := proxytest.Post(t, "http://"+m.Addr().String()+"/cdek", `{"id":"order-17"}`)
	if got.Status != 200 || string(got.Body) != "OK" {
		t.Fatalf("the durable sender got %d %q, want hookonce's 200 OK", got.Status, got.Body)
	}
	waitFor(t, "the given_up notice", func() bool { return len(hook.texts(t)["given_up"]) > 0 })
	time.Sleep(300 * time.Millisecond) // nothing more comes
	if n := site.Executions("order-17"); n != 2 {
		t.Fatalf("the site was tried %d times, want 2 (100ms apart; the next 1m later is past retry_for)", n)
	}
	k := hook.texts(t)
	if len(k["given_up"]) != 1 || len(k) != 1 {
		t.Fatalf("notices %v, want one given_up", k)
	}
	for _, want := range []string{"Sender: cdek", "Key: order-17", "503", "hookonce lookup cdek order-17", "hookonce redeliver cdek order-17"} {
		if !strings.Contains(k["given_up"][0], want) {
			t.Errorf("given_up notice lacks %q:\n%s", want, k["given_up"][0])
		}
	}
}
