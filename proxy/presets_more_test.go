package proxy_test

// The presets for the other senders a shop receives (Telegram, PayKeeper,
// CDEK, WooCommerce) end to end: deliveries signed or secret-checked as
// each provider documents (the signers here share no code with
// contract/), sent through a proxy in front of a counting site, judged by
// executions of the site's handler.

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/hookonce/hookonce/proxy/proxytest"
)

const moreSecret = "shop-secret-word"

const moreConfig = `
senders:
  - name: tg
    preset: telegram
    match: { path: /tg/hook.php }
    signature: { secret_env: MORE_SECRET }
  - name: pk
    preset: paykeeper
    match: { path: /paykeeper/result.php }
    signature: { secret_env: MORE_SECRET }
  - name: cdek
    preset: cdek
    match: { path: /cdek/hook.php }
    signature: { secret_env: MORE_SECRET }
  - name: wc
    preset: woocommerce
    match: { path: /wc/hook.php }
    signature: { secret_env: MORE_SECRET }
`

func md5hex(s string) string { h := md5.Sum([]byte(s)); return hex.EncodeToString(h[:]) }

// moreSite answers as each shop handler does: Telegram's with a Bot API
// call in the body, PayKeeper's with OK md5(id + secret), the others 200.
func moreSite(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	switch r.URL.Path {
	case "/tg/hook.php":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"method":"sendMessage","chat_id":5,"text":"order received"}`)
	case "/paykeeper/result.php":
		form, _ := url.ParseQuery(string(body))
		_, _ = io.WriteString(w, "OK "+md5hex(form.Get("id")+moreSecret))
	default:
		_, _ = io.WriteString(w, "OK")
	}
}

func TestMorePresetsThroughProxy(t *testing.T) {
	t.Setenv("MORE_SECRET", moreSecret)
	pkForm := func(secret, id, sum string) string {
		return url.Values{"id": {id}, "sum": {sum}, "clientid": {"Иванов"}, "orderid": {"77"},
			"key": {md5hex(id + sum + "Иванов" + "77" + secret)}}.Encode()
	}
	cdekBody := func(order, status string) string {
		return `{"type":"ORDER_STATUS","date_time":"2026-01-15T14:30:00+0300","uuid":"` + order +
			`","attributes":{"is_return":false,"cdek_number":"1106207236","status_code":"` + status +
			`","status_date_time":"2026-01-15T14:30:00+0300","city_name":"Москва","city_code":"44"}}`
	}
	wcSig := func(secret, body string) string {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(body))
		return base64.StdEncoding.EncodeToString(m.Sum(nil))
	}

	type delivery struct {
		path, ctype, body string
		header            []string
	}
	cases := []struct {
		name      string
		event     string // the counting site's label (X-Event-Id)
		good      delivery
		other     delivery // the same event id, another body ("" path: none)
		otherRuns bool     // the other body is an event of its own (CDEK)
		wrong     delivery // a wrong secret
		repeatOK  func(t *testing.T, first, again proxytest.Reply)
		runs      int // executions after the delivery and two repeats
	}{
		{
			name: "telegram", event: "tg-10001",
			good:  delivery{"/tg/hook.php", "application/json", `{"update_id":10001,"message":{"message_id":1,"chat":{"id":5,"type":"private"},"date":1,"text":"/start"}}`, []string{"X-Telegram-Bot-Api-Secret-Token", moreSecret}},
			other: delivery{"/tg/hook.php", "application/json", `{"update_id":10001,"message":{"message_id":2,"chat":{"id":5,"type":"private"},"date":1,"text":"/stop"}}`, []string{"X-Telegram-Bot-Api-Secret-Token", moreSecret}},
			wrong: delivery{"/tg/hook.php", "application/json", `{"update_id":10002}`, []string{"X-Telegram-Bot-Api-Secret-Token", "guess"}},
			repeatOK: func(t *testing.T, first, again proxytest.Reply) {
				if !strings.Contains(string(first.Body), "sendMessage") {
					t.Errorf("the first answer lost the site's Bot API call: %q", first.Body)
				}
				if again.Status != 200 || len(again.Body) != 0 || !again.Replayed() {
					t.Errorf("a Telegram repeat got %d %q replayed=%v, want an empty 200: replaying sendMessage would send it again", again.Status, again.Body, again.Replayed())
				}
			},
			runs: 1,
		},
		{
			name: "paykeeper", event: "pk-3431",
			good:  delivery{"/paykeeper/result.php", bxForm, pkForm(moreSecret, "3431", "100.00"), nil},
			other: delivery{"/paykeeper/result.php", bxForm, pkForm(moreSecret, "3431", "200.00"), nil},
			wrong: delivery{"/paykeeper/result.php", bxForm, pkForm("guess", "3432", "100.00"), nil},
			repeatOK: func(t *testing.T, first, again proxytest.Reply) {
				if want := "OK " + md5hex("3431"+moreSecret); string(first.Body) != want || string(again.Body) != want || !again.Replayed() {
					t.Errorf("answers %q then %q (replayed %v), want %q twice", first.Body, again.Body, again.Replayed(), want)
				}
			},
			runs: 1,
		},
		{
			name: "cdek", event: "cdek-order-a",
			good:  delivery{"/cdek/hook.php?token=" + moreSecret, "application/json", cdekBody("order-a", "DELIVERED"), nil},
			other: delivery{"/cdek/hook.php?token=" + moreSecret, "application/json", strings.Replace(cdekBody("order-a", "DELIVERED"), "Москва", "Тверь", 1), nil},
			// CDEK does not resend: a body that differs under one key is
			// another event (changed_payload new_event), never a 422.
			otherRuns: true,
			wrong:     delivery{"/cdek/hook.php?token=guess", "application/json", cdekBody("order-b", "DELIVERED"), nil},
			repeatOK: func(t *testing.T, first, again proxytest.Reply) {
				if string(again.Body) != "OK" || !again.Replayed() {
					t.Errorf("a CDEK repeat got %q replayed=%v", again.Body, again.Replayed())
				}
			},
			runs: 1,
		},
		{
			// WooCommerce names no notification: every delivery reaches the
			// site (three runs), none is refused, none is replayed.
			name: "woocommerce", event: "wc-812",
			good:  delivery{"/wc/hook.php", "application/json", `{"id":812,"status":"processing"}`, []string{"X-WC-Webhook-Signature", wcSig(moreSecret, `{"id":812,"status":"processing"}`), "X-WC-Webhook-Delivery-ID", "d1"}},
			wrong: delivery{"/wc/hook.php", "application/json", `{"id":813}`, []string{"X-WC-Webhook-Signature", wcSig("guess", `{"id":813}`)}},
			repeatOK: func(t *testing.T, first, again proxytest.Reply) {
				if again.Replayed() || again.Status != 200 {
					t.Errorf("a WooCommerce delivery was answered %d replayed=%v, want it forwarded", again.Status, again.Replayed())
				}
			},
			runs: 3,
		},
	}
	store := newStore(t)
	site := proxytest.NewSite(t, moreSite)
	px := proxytest.Start(t, store, site.URL, moreConfig)
	send := func(d delivery, event string) proxytest.Reply {
		return bxSend(t, http.MethodPost, px.URL+d.path, d.ctype, d.body, append([]string{"X-Event-Id", event}, d.header...)...)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			first := send(tc.good, tc.event)
			if first.Status != 200 || first.Replayed() {
				t.Fatalf("first delivery: %d %q replayed=%v\n%s", first.Status, first.Body, first.Replayed(), px.Logs.String())
			}
			// A sender's retry, and a burst of retries at once.
			again := send(tc.good, tc.event)
			tc.repeatOK(t, first, again)
			if tc.name != "woocommerce" {
				var wg sync.WaitGroup
				for range 4 {
					wg.Add(1)
					go func() { defer wg.Done(); send(tc.good, tc.event) }()
				}
				wg.Wait()
			} else {
				send(tc.good, tc.event)
			}
			if n := site.Executions(tc.event); n != tc.runs {
				t.Errorf("the site ran %s %d times, want %d", tc.event, n, tc.runs)
			}
			if tc.other.path != "" && tc.otherRuns {
				if r := send(tc.other, tc.event+"-changed"); r.Status != 200 || r.Replayed() || site.Executions(tc.event+"-changed") != 1 {
					t.Errorf("same key, another body: %d replayed=%v, executions %d; want it run once", r.Status, r.Replayed(), site.Executions(tc.event+"-changed"))
				}
				if r := send(tc.other, tc.event+"-changed"); !r.Replayed() || site.Executions(tc.event+"-changed") != 1 {
					t.Errorf("its exact repeat: replayed=%v, executions %d; want replayed", r.Replayed(), site.Executions(tc.event+"-changed"))
				}
			} else if tc.other.path != "" {
				if r := send(tc.other, tc.event+"-changed"); r.Status < 400 || r.Status >= 500 {
					t.Errorf("same id, another body: %d, want a conflict", r.Status)
				}
				if n := site.Executions(tc.event + "-changed"); n != 0 {
					t.Errorf("a changed payload under a known id ran %d times", n)
				}
			}
			if r := send(tc.wrong, tc.event+"-forged"); r.Status != http.StatusUnauthorized {
				t.Errorf("a wrong secret got %d, want 401", r.Status)
			}
			if n := site.Executions(tc.event + "-forged"); n != 0 {
				t.Errorf("a forged delivery ran %d times", n)
			}
			if strings.Contains(px.Logs.String(), moreSecret) {
				t.Error("the logs hold the secret")
			}
		})
	}
}

// TestPayKeeperFailedAnswerIsRetried: an answer other than OK md5(id +
// secret) frees the claim, so PayKeeper's repeat runs the handler again,
// and the one that then succeeds is kept.
func TestPayKeeperFailedAnswerIsRetried(t *testing.T) {
	t.Setenv("MORE_SECRET", moreSecret)
	var mu sync.Mutex
	fail := true
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			fail = false
			_, _ = io.WriteString(w, "Error: order is locked")
			return
		}
		moreSite(w, r)
	})
	px := proxytest.Start(t, newStore(t), site.URL, moreConfig)
	body := url.Values{"id": {"9"}, "sum": {"5.00"}, "clientid": {""}, "orderid": {""}, "key": {md5hex("9" + "5.00" + moreSecret)}}.Encode()
	for i, want := range []bool{false, false, true} {
		r := bxSend(t, http.MethodPost, px.URL+"/paykeeper/result.php", bxForm, body, "X-Event-Id", "pk-9")
		if r.Replayed() != want {
			t.Errorf("delivery %d: %d %q replayed=%v, want %v", i+1, r.Status, r.Body, r.Replayed(), want)
		}
	}
	if n := site.Executions("pk-9"); n != 2 {
		t.Errorf("the site ran pk-9 %d times, want 2 (the failed answer, then the success)", n)
	}
}
