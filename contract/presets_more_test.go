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
		},
		"cdek": {
			note("order created", `ORDER_STATUS:72753031-a:CREATED:2026-01-15T14\:30\:00+0300`, cd(cdekStatus("72753031-a", "CREATED", "2026-01-15T14:30:00+0300"))),
			note("order accepted at a warehouse", `ORDER_STATUS:72753031-a:RECEIVED_AT_SHIPMENT_WAREHOUSE:2026-01-16T10\:00\:00+0300`, cd(cdekStatus("72753031-a", "RECEIVED_AT_SHIPMENT_WAREHOUSE", "2026-01-16T10:00:00+0300"))),
			note("the same status set again later", `ORDER_STATUS:72753031-a:RECEIVED_AT_SHIPMENT_WAREHOUSE:2026-01-18T09\:00\:00+0300`, cd(cdekStatus("72753031-a", "RECEIVED_AT_SHIPMENT_WAREHOUSE", "2026-01-18T09:00:00+0300"))),
			note("another order, same status and time", `ORDER_STATUS:72753031-b:CREATED:2026-01-15T14\:30\:00+0300`, cd(cdekStatus("72753031-b", "CREATED", "2026-01-15T14:30:00+0300"))),
			note("print form ready", `PRINT_FORM:pf-1`, cd(`{"type":"PRINT_FORM","date_time":"2026-01-15T14:31:00+0300","uuid":"pf-1","attributes":{"type":"waybill","url":"https://api.cdek.ru/v2/print/orders/pf-1.pdf"}}`)),
			note("prealert closed", `PREALERT_CLOSED:pa-1`, cd(`{"type":"PREALERT_CLOSED","date_time":"2026-01-15T15:00:00+0300","uuid":"pa-1","attributes":{"prealert_number":"5","closed_date_time":"2026-01-15T15:00:00+0300"}}`)),
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
