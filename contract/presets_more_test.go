package contract_test

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

// The test's own PayKeeper signer, from its documentation: md5 of id,
// sum, clientid and orderid concatenated, the secret word appended.
func payKeeperForm(secret, id, sum, clientid, orderid string) string {
	k := md5.Sum([]byte(id + sum + clientid + orderid + secret))
	return url.Values{"id": {id}, "sum": {sum}, "clientid": {clientid}, "orderid": {orderid},
		"key": {hex.EncodeToString(k[:])}}.Encode()
}

// payKeeperSent is a notification as PayKeeper sends it: sum spelled as
// sent, signed as PayKeeper's Bitrix module checks it (two decimals:
// signedSum), and clientid and orderid left out when nil.
func payKeeperSent(secret, id, sum, signedSum string, clientid, orderid *string) string {
	v := url.Values{"id": {id}, "sum": {sum}}
	msg := id + signedSum
	if clientid != nil {
		v.Set("clientid", *clientid)
		msg += *clientid
	}
	if orderid != nil {
		v.Set("orderid", *orderid)
		msg += *orderid
	}
	k := md5.Sum([]byte(msg + secret))
	v.Set("key", hex.EncodeToString(k[:]))
	return v.Encode()
}

func ptr(s string) *string { return &s }

func payKeeperOK(secret, id string) string {
	k := md5.Sum([]byte(id + secret))
	return "OK " + hex.EncodeToString(k[:])
}

func cdekStatus(order, code, at string) string {
	return `{"type":"ORDER_STATUS","date_time":"` + at + `","uuid":"` + order + `","attributes":{"is_return":false,"cdek_number":"1106207236","number":"ord-7","status_code":"` +
		code + `","status_date_time":"` + at + `","city_name":"Москва","city_code":"44"}}`
}

// TestMorePresetKeys: every distinct notification each new preset's
// provider sends gets its own key, and the same notification sent again
// (a retry: the same bytes) gets the same key and the same hash.
func TestMorePresetKeys(t *testing.T) {
	t.Setenv("MORE_SECRET", "s3cret-word")
	const pk = "s3cret-word"
	tg := func(body string) presetNote {
		return presetNote{"", func(t *testing.T) *contract.Request {
			return delivery(t, "POST", "/tg", "application/json", body, "", "X-Telegram-Bot-Api-Secret-Token", pk)
		}, ""}
	}
	note := func(what, key string, n presetNote) presetNote { n.what, n.key = what, key; return n }
	form := func(body string) presetNote {
		return presetNote{"", func(t *testing.T) *contract.Request {
			return delivery(t, "POST", "/pk", formType, body, "")
		}, ""}
	}
	cd := func(body string) presetNote {
		return presetNote{"", func(t *testing.T) *contract.Request {
			return delivery(t, "POST", "/cdek?token="+pk, "application/json", body, "")
		}, ""}
	}
	tests := map[string][]presetNote{
		"telegram": {
			note("message", "10001", tg(`{"update_id":10001,"message":{"message_id":1,"chat":{"id":5,"type":"private"},"date":1,"text":"hi"}}`)),
			note("edited message", "10002", tg(`{"update_id":10002,"edited_message":{"message_id":1,"chat":{"id":5,"type":"private"},"date":1,"edit_date":2,"text":"hi!"}}`)),
			note("callback query", "10003", tg(`{"update_id":10003,"callback_query":{"id":"4382","from":{"id":5,"is_bot":false,"first_name":"A"},"data":"buy"}}`)),
			note("pre-checkout query", "10004", tg(`{"update_id":10004,"pre_checkout_query":{"id":"pc1","from":{"id":5,"is_bot":false,"first_name":"A"},"currency":"RUB","total_amount":100,"invoice_payload":"o7"}}`)),
		},
		"paykeeper": {
			note("a payment", "3431", form(payKeeperForm(pk, "3431", "100.00", "Иванов Иван", "77"))),
			note("another payment of the same order", "3432", form(payKeeperForm(pk, "3432", "50.00", "Иванов Иван", "77"))),
			note("a payment without client and order", "3433", form(payKeeperForm(pk, "3433", "10.00", "", ""))),
			// clientid and orderid are not required: absent, they are
			// signed as empty; sum is signed with two decimals however it
			// is spelled (PayKeeper's Bitrix module, result_rec.php).
			note("clientid and orderid absent", "3434", form(payKeeperSent(pk, "3434", "100.00", "100.00", nil, nil))),
			note("sum without decimals", "3435", form(payKeeperSent(pk, "3435", "100", "100.00", ptr("Иванов Иван"), ptr("78")))),
			note("sum with one decimal, no orderid", "3436", form(payKeeperSent(pk, "3436", "100.5", "100.50", ptr("Иванов Иван"), nil))),
		},
		"cdek": {
			// type, uuid and date_time, the event's time, name every event;
			// an order status adds its code and the time it was set.
			note("order created", `ORDER_STATUS:72753031-a:2026-01-15T14\:30\:00+0300:CREATED:2026-01-15T14\:30\:00+0300`, cd(cdekStatus("72753031-a", "CREATED", "2026-01-15T14:30:00+0300"))),
			note("order accepted at a warehouse", `ORDER_STATUS:72753031-a:2026-01-16T10\:00\:00+0300:RECEIVED_AT_SHIPMENT_WAREHOUSE:2026-01-16T10\:00\:00+0300`, cd(cdekStatus("72753031-a", "RECEIVED_AT_SHIPMENT_WAREHOUSE", "2026-01-16T10:00:00+0300"))),
			note("the same status set again later", `ORDER_STATUS:72753031-a:2026-01-18T09\:00\:00+0300:RECEIVED_AT_SHIPMENT_WAREHOUSE:2026-01-18T09\:00\:00+0300`, cd(cdekStatus("72753031-a", "RECEIVED_AT_SHIPMENT_WAREHOUSE", "2026-01-18T09:00:00+0300"))),
			note("another order, same status and time", `ORDER_STATUS:72753031-b:2026-01-15T14\:30\:00+0300:CREATED:2026-01-15T14\:30\:00+0300`, cd(cdekStatus("72753031-b", "CREATED", "2026-01-15T14:30:00+0300"))),
			note("print form ready", `PRINT_FORM:pf-1:2026-01-15T14\:31\:00+0300`, cd(`{"type":"PRINT_FORM","date_time":"2026-01-15T14:31:00+0300","uuid":"pf-1","attributes":{"type":"waybill","url":"https://api.cdek.ru/v2/print/orders/pf-1.pdf"}}`)),
			note("prealert closed", `PREALERT_CLOSED:pa-1:2026-01-15T15\:00\:00+0300`, cd(`{"type":"PREALERT_CLOSED","date_time":"2026-01-15T15:00:00+0300","uuid":"pa-1","attributes":{"prealert_number":"5","closed_date_time":"2026-01-15T15:00:00+0300"}}`)),
			// A type the page does not list, about an order that already
			// had a status event: each one is its own event.
			note("another type about the order", `DELIV_PROBLEM:72753031-a:2026-01-17T12\:00\:00+0300`, cd(`{"type":"DELIV_PROBLEM","date_time":"2026-01-17T12:00:00+0300","uuid":"72753031-a","attributes":{"code":"41"}}`)),
			note("the same type about the order later", `DELIV_PROBLEM:72753031-a:2026-01-18T12\:00\:00+0300`, cd(`{"type":"DELIV_PROBLEM","date_time":"2026-01-18T12:00:00+0300","uuid":"72753031-a","attributes":{"code":"42"}}`)),
		},
	}
	for preset, notes := range tests {
		t.Run(preset, func(t *testing.T) {
			s := mustSender(t, "preset: "+preset, "signature: {secret_env: MORE_SECRET}")
			seen := map[string]string{}
			for _, n := range notes {
				req := n.req(t)
				if err := s.Verify(req, time.Now()); err != nil {
					t.Errorf("%s: signature: %v", n.what, err)
				}
				key, err := s.Key(req)
				if err != nil || key != n.key {
					t.Errorf("%s: key %q, %v; want %q", n.what, key, err, n.key)
					continue
				}
				h1, _, err1 := s.RequestHash(req)
				retry := n.req(t)
				key2, _ := s.Key(retry)
				h2, _, err2 := s.RequestHash(retry)
				if key2 != key || h1 != h2 || err1 != nil || err2 != nil {
					t.Errorf("%s: a retry reads key %q hash %s, the first %q %s", n.what, key2, h2, key, h1)
				}
				if other, dup := seen[key]; dup {
					t.Errorf("%s and %s share the key %q", other, n.what, key)
				}
				seen[key] = n.what
			}
		})
	}
}

// TestMorePresetRefusals: a wrong or missing secret is refused before the
// site sees the delivery, and the error quotes neither the secret nor what
// was sent.
func TestMorePresetRefusals(t *testing.T) {
	t.Setenv("MORE_SECRET", "s3cret-word")
	const wrong = "not-the-word"
	tests := []struct {
		preset string
		req    *contract.Request
	}{
		{"telegram", delivery(t, "POST", "/tg", "application/json", `{"update_id":1}`, "", "X-Telegram-Bot-Api-Secret-Token", wrong)},
		{"telegram", delivery(t, "POST", "/tg", "application/json", `{"update_id":1}`, "")},
		{"paykeeper", delivery(t, "POST", "/pk", formType, payKeeperForm(wrong, "1", "1.00", "", ""), "")},
		{"paykeeper", delivery(t, "POST", "/pk", formType, strings.Replace(payKeeperForm("s3cret-word", "1", "1.00", "", ""), "sum=1.00", "sum=100.00", 1), "")},
		// PayKeeper signs sum with two decimals: "100" as sent is no valid
		// signature, nor is an absent field signed as something.
		{"paykeeper", delivery(t, "POST", "/pk", formType, payKeeperSent("s3cret-word", "1", "100", "100", ptr(""), ptr("")), "")},
		{"paykeeper", delivery(t, "POST", "/pk", formType, payKeeperSent("s3cret-word", "1", "100.00", "100.000", nil, nil), "")},
		{"paykeeper", delivery(t, "POST", "/pk", formType, payKeeperSent("s3cret-word", "1", "1e2x", "100.00", nil, nil), "")},
		{"cdek", delivery(t, "POST", "/cdek?token="+wrong, "application/json", cdekStatus("u", "CREATED", "t"), "")},
		{"cdek", delivery(t, "POST", "/cdek", "application/json", cdekStatus("u", "CREATED", "t"), "")},
		{"woocommerce", delivery(t, "POST", "/wc", "application/json", `{"id":1}`, "", "X-WC-Webhook-Signature", base64.StdEncoding.EncodeToString(mac([]byte(wrong), `{"id":1}`)))},
	}
	for _, tt := range tests {
		s := mustSender(t, "preset: "+tt.preset, "signature: {secret_env: MORE_SECRET}")
		err := s.Verify(tt.req, time.Now())
		if err == nil {
			t.Errorf("%s: a delivery signed with the wrong secret passed", tt.preset)
			continue
		}
		if strings.Contains(err.Error(), "s3cret-word") || strings.Contains(err.Error(), wrong) {
			t.Errorf("%s: the error quotes a secret: %v", tt.preset, err)
		}
	}
}

// TestWooCommerceForwardsEveryDelivery: WooCommerce names no notification
// (its delivery id is the webhook and the second), so the preset checks
// the signature and passes every delivery to the site without dedupe; a
// site that has its own event id names it with key.
func TestWooCommerceForwardsEveryDelivery(t *testing.T) {
	t.Setenv("WC_SECRET", "wc-secret")
	body := `{"id":812,"status":"processing","date_modified_gmt":"2026-01-15T11:00:00"}`
	sig := base64.StdEncoding.EncodeToString(mac([]byte("wc-secret"), body))
	req := func() *contract.Request {
		return delivery(t, "POST", "/wc", "application/json", body, "",
			"X-WC-Webhook-Signature", sig, "X-WC-Webhook-ID", "3", "X-WC-Webhook-Topic", "order.updated",
			"X-WC-Webhook-Delivery-ID", "6c1f0e4d1b7d0d0a")
	}
	s := mustSender(t, "preset: woocommerce", "signature: {secret_env: WC_SECRET}")
	if err := s.Verify(req(), time.Now()); err != nil {
		t.Fatalf("WooCommerce's signature: %v", err)
	}
	if !s.DedupeOff() || len(s.Keys) != 0 {
		t.Fatalf("keys %v, dedupe off %v: want no key and every delivery forwarded", s.Keys, s.DedupeOff())
	}
	if _, ok := s.Passthrough(req(), nil); !ok {
		t.Fatal("a WooCommerce delivery is not forwarded without dedupe")
	}
	own := mustSender(t, "preset: woocommerce", "signature: {secret_env: WC_SECRET}",
		"key: [{header: X-Shop-Event-Id}]")
	r := req()
	r.Header.Set("X-Shop-Event-Id", "e-1")
	if k, err := own.Key(r); err != nil || k != "e-1" || own.DedupeOff() {
		t.Errorf("the sender's own key: %q %v, dedupe off %v: want it deduplicated", k, err, own.DedupeOff())
	}
	// hmac-sha256, the other preset without keys, still wants one.
	if _, err := contract.Parse([]byte(senderYAML("preset: hmac-sha256", "signature: {secret_env: WC_SECRET, header: X-Sig}")), "x.yaml"); err == nil {
		t.Error("hmac-sha256 without a key parsed")
	}
}

// TestTelegramRepeatIsEmpty200: a Telegram repeat is answered 200 with no
// body unless the sender asks for the replay.
func TestTelegramRepeatIsEmpty200(t *testing.T) {
	t.Setenv("TG", "tok")
	if s := mustSender(t, "preset: telegram", "signature: {secret_env: TG}"); s.DuplicateStatus != 200 {
		t.Errorf("duplicate status %d, want 200", s.DuplicateStatus)
	}
	if s := mustSender(t, "preset: telegram", "signature: {secret_env: TG}", "duplicate: replay"); s.DuplicateStatus != 0 {
		t.Errorf("duplicate: replay gives %d, want 0 (replay)", s.DuplicateStatus)
	}
	if s := mustSender(t, "preset: paykeeper", "signature: {secret_env: TG}"); s.DuplicateStatus != 0 {
		t.Errorf("paykeeper duplicate status %d, want replay", s.DuplicateStatus)
	}
}

// TestSuccessDigest: PayKeeper's answer "OK " + md5(id + secret) is the
// success answer under each current secret and nothing else; a template
// keeps the secret inside digests; errors never hold it.
func TestSuccessDigest(t *testing.T) {
	t.Setenv("PK", "word-1")
	t.Setenv("PK_OLD", "word-0")
	s := mustSender(t, "preset: paykeeper", "signature: {secret_env: PK, previous_secret_env: PK_OLD}")
	req := delivery(t, "POST", "/pk", formType, payKeeperForm("word-1", "3431", "1.00", "", ""), "")
	for _, tt := range []struct {
		body string
		ok   bool
	}{
		{payKeeperOK("word-1", "3431"), true},
		{payKeeperOK("word-1", "3431") + "\n", true},
		{payKeeperOK("word-0", "3431"), true}, // the site still has the previous word
		{payKeeperOK("word-1", "3432"), false},
		{payKeeperOK("other", "3431"), false},
		{"OK", false},
		{"OK " + strings.ToUpper(payKeeperOK("word-1", "3431")[3:]), false},
		{"Error! Hash mismatch", false},
	} {
		ok, why := s.Succeeded(req, 200, []byte(tt.body))
		if ok != tt.ok {
			t.Errorf("answer %q: success %v (%s), want %v", tt.body, ok, why, tt.ok)
		}
		if strings.Contains(why, "word-") || strings.Contains(why, payKeeperOK("word-1", "3431")[3:]) {
			t.Errorf("the reason quotes the secret or the expected digest: %s", why)
		}
	}

	// The template language: digests of each algorithm, in a config.
	t.Setenv("DG", "k")
	for _, tt := range []struct {
		tpl, want string
	}{
		{"{md5:{form.a}{secret}}", "a6f62b73f5a9bf380d32f062f2d71cbc"},
		{"OK{sha1:x}", "OK11f6ad8ec52a2984abaafd7c3b516503785c2072"},
		{"{sha256:{form.a}-{secret}}:{form.a}", "8af45d88cf8d98987e955d6fbbf863eabcb93a4bf6dd2ac6a4186b8c11804c87:1"},
	} {
		sd := mustSender(t, "key: [{form: a}]", "signature: {scheme: digest, secret_env: DG, message: {parts: ['{form.a}', '{secret}']}, from: [{form: sig}]}",
			"success: {body: '"+tt.tpl+"'}")
		r := delivery(t, "POST", "/hook", formType, "a=1", "")
		if ok, why := sd.Succeeded(r, 200, []byte(tt.want)); !ok {
			t.Errorf("%s: %q is not the success body: %s", tt.tpl, tt.want, why)
		}
	}
	for _, tt := range []struct{ yaml, want string }{
		{"success: {body: 'OK {secret}'}", "only inside a digest"},
		{"success: {body: 'OK {md4:{secret}}'}", "want a digest"},
		{"success: {body: 'OK {md5:{form.a}'}", "unclosed"},
		{"success: {body: 'OK {md5:{md5:x}}'}", "{md5"},
	} {
		_, err := contract.Parse([]byte(senderYAML("key: [{form: a}]", "signature: {scheme: digest, secret_env: DG, message: {parts: ['{secret}']}, from: [{form: sig}]}", tt.yaml)), "x.yaml")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", tt.yaml, err, tt.want)
		}
	}
	// A reference whose name holds a colon is still a reference.
	if _, err := contract.ParseTemplate("OK{body.a:b}{form.x}"); err != nil {
		t.Errorf("a body path with a colon: %v", err)
	}
	// A digest of the secret needs a sender that has one.
	if _, err := contract.Parse([]byte(senderYAML("key: [{form: a}]", "success: {body: 'OK {md5:{secret}}'}")), "x.yaml"); err == nil ||
		!strings.Contains(err.Error(), "signature secret") {
		t.Errorf("a secret digest without a secret: %v", err)
	}
	if _, err := contract.Parse([]byte(senderYAML("key: [{form: a}]", "signature: {scheme: token, secret_env: DG, from: [{form: t}]}", "success: {body: 'OK {md5:{secret}}'}")), "x.yaml"); err == nil {
		t.Error("a token sender's secret went into a success digest")
	}
}

// TestWooCommercePing: the unsigned test request WooCommerce posts when a
// webhook is saved (WC_Webhook::deliver_ping: the body webhook_id=<id>,
// no X-WC-Webhook-* header) is a ping, answered by hookonce; nothing else
// is: a body with anything more, a signed delivery, another method.
func TestWooCommercePing(t *testing.T) {
	t.Setenv("WC_SECRET", "wc-secret")
	s := mustSender(t, "preset: woocommerce", "signature: {secret_env: WC_SECRET}")
	for _, tt := range []struct {
		what string
		req  *contract.Request
		ping bool
	}{
		{"the ping, as WordPress posts it", delivery(t, "POST", "/wc", formType+"; charset=UTF-8", "webhook_id=17", "", "User-Agent", "WooCommerce/9.4.2 Hookshot (WordPress/6.7)"), true},
		{"the ping without a content type", delivery(t, "POST", "/wc", "", "webhook_id=3", ""), true},
		{"a ping with another field", delivery(t, "POST", "/wc", formType, "webhook_id=17&topic=order.created", ""), false},
		{"a ping with a trailing newline", delivery(t, "POST", "/wc", formType, "webhook_id=17\n", ""), false},
		{"a ping whose id is no number", delivery(t, "POST", "/wc", formType, "webhook_id=x", ""), false},
		{"a ping carrying a signature header", delivery(t, "POST", "/wc", formType, "webhook_id=17", "", "X-WC-Webhook-Signature", "AAAA"), false},
		{"a JSON delivery", delivery(t, "POST", "/wc", "application/json", `{"webhook_id":17}`, ""), false},
		{"by GET", delivery(t, "GET", "/wc?webhook_id=17", "", "", ""), false},
	} {
		reason, ok := s.Ping(tt.req)
		if ok != tt.ping || (ok && reason == "") {
			t.Errorf("%s: ping %v (%q), want %v", tt.what, ok, reason, tt.ping)
		}
		if !ok && s.Verify(tt.req, time.Now()) == nil {
			t.Errorf("%s: not a ping, yet its signature holds", tt.what)
		}
	}
	// Only the preset names a ping.
	if _, ok := mustSender(t, "preset: hmac-sha256", "key: [{form: webhook_id}]", "signature: {secret_env: WC_SECRET, header: X-Sig}").
		Ping(delivery(t, "POST", "/wc", formType, "webhook_id=17", "")); ok {
		t.Error("a sender of another preset answers WooCommerce's ping")
	}
}

// TestMessageModifiers: {optional:…} signs an absent value as empty (a
// present empty one too), and without it an absent value is refused and
// named; {decimal2:…} signs the number as PHP's number_format with two
// decimals, and refuses what is no number.
func TestMessageModifiers(t *testing.T) {
	t.Setenv("DG", "k")
	s := mustSender(t, "key: [{form: a}]",
		"signature: {scheme: digest, algorithm: md5, secret_env: DG, message: {parts: ['{form.a}', '{optional:form.b}', '{decimal2:form.c}', '{secret}']}, from: [{form: sig}]}")
	signed := func(msg, form string) *contract.Request {
		k := md5.Sum([]byte(msg))
		return delivery(t, "POST", "/hook", formType, form+"&sig="+hex.EncodeToString(k[:]), "")
	}
	for _, tt := range []struct {
		what string
		req  *contract.Request
		ok   bool
	}{
		{"b absent", signed("1"+"5.00"+"k", "a=1&c=5"), true},
		{"b empty", signed("1"+"5.00"+"k", "a=1&b=&c=5"), true},
		{"b present", signed("1"+"x"+"5.50"+"k", "a=1&b=x&c=5.5"), true},
		{"c as sent, not formatted", signed("1"+"5"+"k", "a=1&c=5"), false},
		{"c no number", signed("1"+"k", "a=1&c=five"), false},
		{"c absent", signed("1"+"k", "a=1"), false},
	} {
		err := s.Verify(tt.req, time.Now())
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v, want valid %v", tt.what, err, tt.ok)
		}
	}
	if _, err := contract.Parse([]byte(senderYAML("key: [{form: a}]", "signature: {scheme: digest, secret_env: DG, message: {parts: ['{secret}']}, from: [{form: sig}]}",
		"success: {body: 'OK {optional:form.a}'}")), "x.yaml"); err == nil {
		t.Error("a modifier outside a signature message or digest parsed")
	}
}
