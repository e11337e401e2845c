package proxy_test

// The 1C-Bitrix payment presets end to end: each sender's deliveries are
// signed the way its documentation says (the signers here share no code
// with contract/), sent through a proxy in front of a counting site, and
// judged by executions of the site's handler, not by statuses. None of
// these senders signs a timestamp, so there is no stale case; a forged
// source address plays that part for YooKassa.

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/providersign"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// bxSend delivers body with method and content type, plus headers; the
// X-Event-Id header names the event to the counting site only.
func bxSend(t *testing.T, method, target, ctype, body string, header ...string) proxytest.Reply {
	t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return proxytest.Reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

const bxForm = "application/x-www-form-urlencoded"

// bxEvent is one business event a sender notifies: its id (the record's
// key in the store) and the counting site's label for it.
type bxEvent struct {
	id    string // the payment, order or entity
	kind  string // the event type or status, where the sender has one
	label string
}

// bxPreset drives one preset: send delivers ev signed with secret (or,
// for YooKassa, from the address secret names), tamper changes the signed
// content after signing.
type bxPreset struct {
	name         string
	secret, old  string
	wrong        string
	top, extra   string // YAML at the top and under the sender
	send         func(t *testing.T, base, secret string, ev bxEvent, tamper bool) proxytest.Reply
	key          func(ev bxEvent) string // the record's key
	succeed      func(r *http.Request, w http.ResponseWriter)
	fail         func(w http.ResponseWriter) // a final answer the success rule refuses; nil: none
	kinds        [2]string                   // two event kinds of one payment
	noSuccessRow bool
	// noDedupe: every delivery is forwarded without dedupe (Bitrix24:
	// no field names an event alone), so a repeat runs again.
	noDedupe bool
}

func bxHex(h []byte) string { return hex.EncodeToString(h) }

func bxMAC(secret, msg string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(msg))
	return m.Sum(nil)
}

var bxPresets = []bxPreset{
	{
		name: "robokassa", secret: "robo-password-2", old: "robo-old-password", wrong: "robo-password-1",
		// Result URL: OutSum:InvId:Password2:Shp_… sorted, MD5, upper case.
		send: func(t *testing.T, base, secret string, ev bxEvent, tamper bool) proxytest.Reply {
			f := url.Values{"OutSum": {"1500.000000"}, "InvId": {ev.id}, "SHP_HANDLER": {"ROBOXCHANGE"}, "SHP_BX_PAYSYSTEM_CODE": {"7"}, "IsTest": {"1"}}
			f.Set("SignatureValue", providersign.Robokassa(md5.New, secret, f))
			if tamper {
				f.Set("OutSum", "15.000000")
			}
			return bxSend(t, "POST", base+"/bitrix/tools/sale_ps_result.php", bxForm, f.Encode(), "X-Event-Id", ev.label)
		},
		key: func(ev bxEvent) string { return ev.id },
		succeed: func(r *http.Request, w http.ResponseWriter) {
			_ = r.ParseForm()
			io.WriteString(w, "OK"+r.FormValue("InvId"))
		},
		fail: func(w http.ResponseWriter) {}, // 200 with an empty body: the order was not paid
	},
	{
		name: "tbank", secret: "tb-terminal-password", old: "tb-old-password", wrong: "tb-other-password",
		kinds: [2]string{"AUTHORIZED", "CONFIRMED"},
		// Token: SHA-256 of the sorted root values with Password among them.
		send: func(t *testing.T, base, secret string, ev bxEvent, tamper bool) proxytest.Reply {
			kind := ev.kind
			if kind == "" {
				kind = "CONFIRMED"
			}
			pid, _ := strconv.Atoi(ev.id)
			token := providersign.TBankToken(secret, map[string]string{"TerminalKey": "1700000000DEMO", "OrderId": "ord-" + ev.id, "Success": "true",
				"Status": kind, "PaymentId": ev.id, "ErrorCode": "0", "Amount": "150000", "Pan": "430000******0777"})
			amount := 150000
			if tamper {
				amount = 1
			}
			body, _ := json.Marshal(map[string]any{"TerminalKey": "1700000000DEMO", "OrderId": "ord-" + ev.id, "Success": true,
				"Status": kind, "PaymentId": pid, "ErrorCode": "0", "Amount": amount, "Pan": "430000******0777",
				"Data": map[string]any{"Route": "TCB"}, "Token": token})
			return bxSend(t, "POST", base+"/bitrix/tools/sale_ps_result.php", "application/json", string(body), "X-Event-Id", ev.label)
		},
		key:     func(ev bxEvent) string { return ev.id + ":" + orDefault(ev.kind, "CONFIRMED") },
		succeed: func(r *http.Request, w http.ResponseWriter) { io.WriteString(w, "OK") },
		fail:    func(w http.ResponseWriter) { io.WriteString(w, "ERROR") },
	},
	{
		name: "cloudpayments", secret: "cp-api-secret", old: "cp-old-secret", wrong: "cp-public-id",
		kinds: [2]string{"check", "pay"},
		// Content-HMAC: base64 HMAC-SHA256 of the raw body; the action is
		// in the notification URL.
		send: func(t *testing.T, base, secret string, ev bxEvent, tamper bool) proxytest.Reply {
			f := url.Values{"TransactionId": {ev.id}, "Amount": {"1500.00"}, "Currency": {"RUB"}, "InvoiceId": {"77"},
				"Status": {"Completed"}, "Data": {`{"note":"a b&c"}`}}
			body := f.Encode()
			sig := base64.StdEncoding.EncodeToString(bxMAC(secret, body))
			if tamper {
				body = strings.Replace(body, "1500.00", "15.00", 1)
			}
			action := orDefault(ev.kind, "pay")
			return bxSend(t, "POST", base+"/bitrix/tools/sale_ps_result.php?action="+action, bxForm, body,
				"Content-HMAC", sig, "X-Content-HMAC", sig, "X-Event-Id", ev.label)
		},
		key:     func(ev bxEvent) string { return ev.id + ":" + orDefault(ev.kind, "pay") },
		succeed: func(r *http.Request, w http.ResponseWriter) { io.WriteString(w, `{"code":0}`) },
		fail:    func(w http.ResponseWriter) { io.WriteString(w, `{"code":13}`) },
	},
	{
		name: "rbs", secret: "rbs-callback-key", old: "rbs-old-key", wrong: "rbs-other-key",
		extra: "    match: { method: \"GET,POST\", path: /bitrix/tools/sale_ps_result.php }\n",
		kinds: [2]string{"approved", "deposited"},
		// checksum: upper-case HMAC-SHA256 of sorted "name;value;" pairs,
		// sent by GET.
		send: func(t *testing.T, base, secret string, ev bxEvent, tamper bool) proxytest.Reply {
			op := orDefault(ev.kind, "deposited")
			msg := "amount;150000;mdOrder;" + ev.id + ";operation;" + op + ";orderNumber;1042;status;1;"
			q := url.Values{"mdOrder": {ev.id}, "orderNumber": {"1042"}, "operation": {op}, "status": {"1"}, "amount": {"150000"},
				"checksum": {strings.ToUpper(bxHex(bxMAC(secret, msg)))}, "sign_alias": {"key1"}}
			if tamper {
				q.Set("amount", "1")
			}
			return bxSend(t, "GET", base+"/bitrix/tools/sale_ps_result.php?"+q.Encode(), "", "", "X-Event-Id", ev.label)
		},
		key:     func(ev bxEvent) string { return ev.id + ":" + orDefault(ev.kind, "deposited") + ":1" },
		succeed: func(r *http.Request, w http.ResponseWriter) { io.WriteString(w, "ok") },
		fail:    func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadRequest) },
	},
	{
		name: "bitrix24", secret: "b24-application-token", old: "b24-old-token", wrong: "b24-other-token",
		kinds: [2]string{"ONCRMDEALADD", "ONCRMDEALUPDATE"},
		// A shared application token in auth[application_token].
		send: func(t *testing.T, base, secret string, ev bxEvent, tamper bool) proxytest.Reply {
			f := url.Values{"event": {orDefault(ev.kind, "ONCRMDEALUPDATE")}, "event_handler_id": {"12"}, "data[FIELDS][ID]": {ev.id},
				"ts": {"1764451200"}, "auth[domain]": {"shop.bitrix24.ru"}, "auth[application_token]": {secret}}
			if tamper {
				f.Set("auth[application_token]", secret[:len(secret)-1])
			}
			return bxSend(t, "POST", base+"/b24/handler.php", bxForm, f.Encode(), "X-Event-Id", ev.label)
		},
		key:          func(ev bxEvent) string { return orDefault(ev.kind, "ONCRMDEALUPDATE") + ":" + ev.id + ":1764451200" },
		succeed:      func(r *http.Request, w http.ResponseWriter) { io.WriteString(w, "ok") },
		noSuccessRow: true,
		noDedupe:     true,
	},
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (p bxPreset) config() string {
	path := "/bitrix/tools/sale_ps_result.php"
	if p.name == "bitrix24" {
		path = "/b24/handler.php"
	}
	match := "    match: { path: " + path + " }\n"
	if strings.Contains(p.extra, "match:") {
		match = ""
	}
	return p.top + "senders:\n  - name: s\n    preset: " + p.name + "\n" + match + p.extra +
		"    signature: { secret_env: BX_SECRET, previous_secret_env: BX_OLD }\n"
}

// bxSite answers with p.succeed, except for events labelled fail-…,
// whose first execution gets p.fail.
func bxSite(t *testing.T, p bxPreset) *proxytest.Site {
	var site *proxytest.Site
	site = proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		label := r.Header.Get("X-Event-Id")
		if strings.HasPrefix(label, "fail-") && site.Executions(label) == 1 {
			p.fail(w)
			return
		}
		p.succeed(r, w)
	})
	return site
}

func TestBitrixPresetsEndToEnd(t *testing.T) {
	for _, p := range bxPresets {
		t.Run(p.name, func(t *testing.T) {
			t.Setenv("BX_SECRET", p.secret)
			t.Setenv("BX_OLD", p.old)
			store := newStore(t)
			site := bxSite(t, p)
			px := proxytest.Start(t, store, site.URL, p.config())
			ev := bxEvent{id: "90001", label: "ev-1"}

			// Tampered: 401, no claim, the site untouched.
			if got := p.send(t, px.URL, p.secret, ev, true); got.Status != http.StatusUnauthorized {
				t.Fatalf("tampered: %d %s, want 401", got.Status, got.Body)
			}
			ctNoRecord(t, store, p.key(ev))
			// Wrong secret.
			if got := p.send(t, px.URL, p.wrong, ev, false); got.Status != http.StatusUnauthorized {
				t.Fatalf("wrong secret: %d %s, want 401", got.Status, got.Body)
			}
			ctNoRecord(t, store, p.key(ev))
			if n := site.Executions("ev-1"); n != 0 {
				t.Fatalf("refused deliveries reached the site %d times", n)
			}
			// The genuine delivery runs once; its redeliveries are replayed.
			first := p.send(t, px.URL, p.secret, ev, false)
			if first.Status != 200 || first.Replayed() {
				t.Fatalf("valid: %d replayed=%v %s", first.Status, first.Replayed(), first.Body)
			}
			if p.noDedupe {
				// Forwarded without dedupe: each one runs, nothing is stored.
				for i := 2; i <= 3; i++ {
					again := p.send(t, px.URL, p.secret, ev, false)
					if again.Status != 200 || again.Replayed() || site.Executions("ev-1") != i {
						t.Fatalf("delivery %d: %d replayed=%v executions %d; want the site run again", i, again.Status, again.Replayed(), site.Executions("ev-1"))
					}
				}
				ctNoRecord(t, store, p.key(ev))
				if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "s", "outcome", "passthrough"); n != 3 {
					t.Fatalf("passthrough counted %v, want 3", n)
				}
				return
			}
			for range 2 {
				again := p.send(t, px.URL, p.secret, ev, false)
				if again.Status != 200 || !again.Replayed() || string(again.Body) != string(first.Body) {
					t.Fatalf("redelivery: %d replayed=%v %q, want the stored %q", again.Status, again.Replayed(), again.Body, first.Body)
				}
			}
			if n := site.Executions("ev-1"); n != 1 {
				t.Fatalf("executions = %d, want 1", n)
			}
			if rec, err := get(t, store, "s", p.key(ev)); err != nil || rec.State != dedupe.StateDone {
				t.Fatalf("record %s = %+v, %v; want done", p.key(ev), rec, err)
			}
			// Rotation: the previous secret still verifies.
			if got := p.send(t, px.URL, p.old, bxEvent{id: "90002", label: "ev-old"}, false); got.Status != 200 || site.Executions("ev-old") != 1 {
				t.Fatalf("previous secret: %d, executions %d", got.Status, site.Executions("ev-old"))
			}
			// Two notifications of one payment are two events.
			if p.kinds[0] != "" {
				for i, kind := range p.kinds {
					got := p.send(t, px.URL, p.secret, bxEvent{id: "90003", kind: kind, label: "ev-kind-" + kind}, false)
					if got.Status != 200 || got.Replayed() || site.Executions("ev-kind-"+kind) != 1 {
						t.Fatalf("notification %d (%s): %d replayed=%v executions %d", i, kind, got.Status, got.Replayed(), site.Executions("ev-kind-"+kind))
					}
				}
			}
			if strings.Contains(px.Logs.String(), p.secret) {
				t.Fatal("the log quotes the secret")
			}
		})
	}
}

// TestBitrixSuccessRules: the site answers a final status that the
// preset's success rule refuses (Robokassa's empty 200, T-Bank's ERROR,
// CloudPayments' code 13, a 400 where 2xx is required). That answer goes
// to the sender and is not stored; the retry runs the handler again and
// its success is stored; the third delivery is replayed.
func TestBitrixSuccessRules(t *testing.T) {
	for _, p := range bxPresets {
		if p.noSuccessRow {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			t.Setenv("BX_SECRET", p.secret)
			t.Setenv("BX_OLD", p.old)
			store := newStore(t)
			site := bxSite(t, p)
			px := proxytest.Start(t, store, site.URL, p.config())
			ev := bxEvent{id: "91001", label: "fail-1"}

			failed := httptest.NewRecorder()
			p.fail(failed)
			first := p.send(t, px.URL, p.secret, ev, false)
			if first.Status != failed.Code || string(first.Body) != failed.Body.String() || first.Replayed() || site.Executions("fail-1") != 1 {
				t.Fatalf("first: %d %q replayed=%v executions %d; want the site's own %d %q passed on",
					first.Status, first.Body, first.Replayed(), site.Executions("fail-1"), failed.Code, failed.Body.String())
			}
			proxytest.AssertFreed(t, store, "s", p.key(ev))
			second := p.send(t, px.URL, p.secret, ev, false)
			if second.Status != 200 || second.Replayed() || site.Executions("fail-1") != 2 {
				t.Fatalf("retry: %d replayed=%v executions %d, want the handler run again", second.Status, second.Replayed(), site.Executions("fail-1"))
			}
			third := p.send(t, px.URL, p.secret, ev, false)
			if !third.Replayed() || string(third.Body) != string(second.Body) || site.Executions("fail-1") != 2 {
				t.Fatalf("third: replayed=%v %q executions %d; want the stored success %q", third.Replayed(), third.Body, site.Executions("fail-1"), second.Body)
			}
			if got := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "s", "outcome", "not_success"); got != 1 {
				t.Errorf("not_success counted %v times, want 1", got)
			}
		})
	}
}

// TestYooKassaAllowlistBehindProxy: YooKassa signs nothing; its address is
// the check. Behind the site's nginx (a trusted loopback peer) the address
// is the one nginx forwarded; from an untrusted peer a forwarded address
// is ignored and the peer itself is judged.
func TestYooKassaAllowlistBehindProxy(t *testing.T) {
	send := func(t *testing.T, base, xff, id, event string) proxytest.Reply {
		body := `{"type":"notification","event":"` + event + `","object":{"id":"` + id + `","status":"succeeded","amount":{"value":"1500.00","currency":"RUB"}}}`
		return bxSend(t, "POST", base+"/yookassa/notify.php", "application/json", body, "X-Forwarded-For", xff, "X-Event-Id", id+"/"+event)
	}
	const sender = "senders:\n  - name: s\n    preset: yookassa\n    match: { path: /yookassa/notify.php }\n"

	t.Run("trusted nginx", func(t *testing.T) {
		store := newStore(t)
		site := proxytest.NewSite(t, nil)
		px := proxytest.Start(t, store, site.URL, "trusted_proxies: [127.0.0.1]\n"+sender)
		const pay = "2e9a1f5c-000f-5000-9000-1b6c2d3e4f50"
		// A forged delivery from outside YooKassa's networks.
		if got := send(t, px.URL, "203.0.113.9", pay, "payment.succeeded"); got.Status != http.StatusUnauthorized {
			t.Fatalf("from 203.0.113.9: %d, want 401", got.Status)
		}
		// A chain whose sender is outside, behind a hop inside the list:
		// the last untrusted hop is the sender.
		if got := send(t, px.URL, "185.71.76.5, 203.0.113.9", pay, "payment.succeeded"); got.Status != http.StatusUnauthorized {
			t.Fatalf("spoofed first hop: %d, want 401", got.Status)
		}
		ctNoRecord(t, store, pay+":payment.succeeded")
		for _, step := range []struct {
			xff, event string
			replayed   bool
		}{
			{"185.71.76.5", "payment.waiting_for_capture", false},
			{"2a02:5180:0:1509::17", "payment.succeeded", false}, // the same payment's next event
			{"77.75.156.11", "payment.succeeded", true},          // its redelivery, from another of YooKassa's hosts
		} {
			got := send(t, px.URL, step.xff, pay, step.event)
			if got.Status != 200 || got.Replayed() != step.replayed {
				t.Fatalf("%s from %s: %d replayed=%v, want 200 replayed=%v", step.event, step.xff, got.Status, got.Replayed(), step.replayed)
			}
		}
		if a, b := site.Executions(pay+"/payment.waiting_for_capture"), site.Executions(pay+"/payment.succeeded"); a != 1 || b != 1 {
			t.Fatalf("executions: waiting_for_capture %d, succeeded %d; want 1 each", a, b)
		}
	})
	t.Run("untrusted peer", func(t *testing.T) {
		store := newStore(t)
		site := proxytest.NewSite(t, nil)
		px := proxytest.Start(t, store, site.URL, sender)
		if got := send(t, px.URL, "185.71.76.5", "p2", "payment.succeeded"); got.Status != http.StatusUnauthorized {
			t.Fatalf("forwarded address from an untrusted peer: %d, want 401 (the peer 127.0.0.1 is judged)", got.Status)
		}
		if site.Total() != 0 {
			t.Fatalf("the site ran %d times", site.Total())
		}
	})
	t.Run("success rule", func(t *testing.T) {
		store := newStore(t)
		var site *proxytest.Site
		site = proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
			if site.Executions(r.Header.Get("X-Event-Id")) == 1 {
				w.WriteHeader(http.StatusNotFound) // final by default, but not 2xx
				return
			}
			io.WriteString(w, "ok")
		})
		px := proxytest.Start(t, store, site.URL, "trusted_proxies: [127.0.0.1]\n"+sender)
		for i, want := range []struct {
			status   int
			replayed bool
			execs    int
		}{{404, false, 1}, {200, false, 2}, {200, true, 2}} {
			got := send(t, px.URL, "185.71.77.30", "p3", "payment.succeeded")
			if got.Status != want.status || got.Replayed() != want.replayed || site.Executions("p3/payment.succeeded") != want.execs {
				t.Fatalf("delivery %d: %d replayed=%v executions %d; want %+v", i+1, got.Status, got.Replayed(), site.Executions("p3/payment.succeeded"), want)
			}
		}
	})
}
