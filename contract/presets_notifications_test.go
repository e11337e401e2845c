package contract_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

// presetNote is one notification a provider sends, as the preset reads it.
type presetNote struct {
	what string
	req  func(t *testing.T) *contract.Request
	key  string // "" when it carries no event id the preset keys on
}

func jsonNote(what, body, key string) presetNote {
	return presetNote{what, func(t *testing.T) *contract.Request {
		return delivery(t, "POST", "/n", "application/json", body, "")
	}, key}
}

func formNote(what, target, body, key string) presetNote {
	return presetNote{what, func(t *testing.T) *contract.Request {
		return delivery(t, "POST", target, formType, body, "")
	}, key}
}

func getNote(what, target, key string) presetNote {
	return presetNote{what, func(t *testing.T) *contract.Request {
		return delivery(t, "GET", target, "", "", "")
	}, key}
}

// TestPresetNotificationKeys goes through every notification each Bitrix
// preset's provider sends (the lists and sources are in presets.go and
// docs/senders.md): each gets its own key, and the same notification sent again
// gets the same one. The ones the providers send more than once per
// payment are here twice, with what differs between them: T-Bank's and
// RBS's partial refunds (the amount), T-Bank's receipts (the fiscal
// document), CloudPayments' and YooKassa's refunds (the refund's own id).
func TestPresetNotificationKeys(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "user:secret")
	tb := func(status, extra string) string {
		return `{"TerminalKey":"T","OrderId":"21050","Success":true,"Status":"` + status + `","PaymentId":13660,"ErrorCode":"0"` + extra + `,"Token":"x"}`
	}
	cp := "/bitrix/tools/sale_ps_result.php?action="
	rbs := "/cb?mdOrder=3ff6962a&orderNumber=10747_5_0&checksum=X&"
	tests := map[string][]presetNote{
		"robokassa": {
			formNote("result by POST", "/r", "OutSum=10.00&InvId=84&SignatureValue=X", "84"),
			getNote("result by GET, another payment", "/r?OutSum=10.00&InvId=85&SignatureValue=X", "85"),
		},
		"yookassa": {
			jsonNote("waiting_for_capture", `{"event":"payment.waiting_for_capture","object":{"id":"p1"}}`, "p1:payment.waiting_for_capture"),
			jsonNote("succeeded", `{"event":"payment.succeeded","object":{"id":"p1"}}`, "p1:payment.succeeded"),
			jsonNote("canceled", `{"event":"payment.canceled","object":{"id":"p2"}}`, "p2:payment.canceled"),
			jsonNote("first partial refund", `{"event":"refund.succeeded","object":{"id":"r1","payment_id":"p1","amount":{"value":"1.00"}}}`, "r1:refund.succeeded"),
			jsonNote("second partial refund", `{"event":"refund.succeeded","object":{"id":"r2","payment_id":"p1","amount":{"value":"1.00"}}}`, "r2:refund.succeeded"),
		},
		"tbank": {
			jsonNote("authorized", tb("AUTHORIZED", `,"Amount":100000`), "13660:AUTHORIZED"),
			jsonNote("confirmed", tb("CONFIRMED", `,"Amount":100000`), "13660:CONFIRMED"),
			// Amount is "the amount in kopecks", no more: two equal partial
			// refunds may be alike byte for byte, so each is forwarded.
			jsonNote("first partial refund", tb("PARTIAL_REFUNDED", `,"Amount":20000`), ""),
			jsonNote("second partial refund, the same amount", tb("PARTIAL_REFUNDED", `,"Amount":20000`), ""),
			jsonNote("partial reversal", tb("PARTIAL_REVERSED", `,"Amount":5000`), ""),
			jsonNote("the rest refunded", tb("REFUNDED", `,"Amount":50000`), "13660:REFUNDED"),
			jsonNote("reversed", `{"TerminalKey":"T","OrderId":"21051","Success":true,"Status":"REVERSED","PaymentId":13662,"ErrorCode":"0","Amount":100,"Token":"x"}`, "13662:REVERSED"),
			jsonNote("payment receipt", tb("RECEIPT", `,"Amount":100000,"FiscalDocumentNumber":101,"Type":"Income"`), "13660:RECEIPT:101"),
			jsonNote("refund receipt", tb("RECEIPT", `,"Amount":20000,"FiscalDocumentNumber":102,"Type":"IncomeReturn"`), "13660:RECEIPT:102"),
			jsonNote("card attached", `{"TerminalKey":"T","CustomerKey":"c1","RequestKey":"rk-1","Success":true,"Status":"COMPLETED","PaymentId":13661,"ErrorCode":"0","Token":"x"}`, "13661:COMPLETED"),
			jsonNote("QR account linked", `{"TerminalKey":"T","RequestKey":"rk-2","NotificationType":"LINKACCOUNT","Success":true,"ErrorCode":"0","Status":"ACTIVE","Token":"x"}`, "rk-2:ACTIVE"),
			jsonNote("QR account unlinked", `{"TerminalKey":"T","RequestKey":"rk-2","NotificationType":"LINKACCOUNT","Success":true,"ErrorCode":"0","Status":"INACTIVE","Token":"x"}`, "rk-2:INACTIVE"),
		},
		"cloudpayments": {
			formNote("check", cp+"check", "TransactionId=504&Amount=10.00&InvoiceId=7", "504:check"),
			formNote("pay", cp+"pay", "TransactionId=504&Amount=10.00&InvoiceId=7&Status=Authorized", "504:pay"),
			formNote("fail", cp+"fail", "TransactionId=503&Amount=10.00&InvoiceId=7", "503:fail"),
			formNote("confirm", cp+"confirm", "TransactionId=504&Amount=10.00&InvoiceId=7&Status=Completed", "504:confirm"),
			formNote("first partial refund", cp+"refund", "TransactionId=505&PaymentTransactionId=504&Amount=2.00&InvoiceId=7", "505:refund"),
			formNote("second partial refund", cp+"refund", "TransactionId=506&PaymentTransactionId=504&Amount=2.00&InvoiceId=7", "506:refund"),
			formNote("cancel", cp+"cancel", "TransactionId=507&Amount=10.00&InvoiceId=8", "507:cancel"),
		},
		"rbs": {
			getNote("approved", rbs+"operation=approved&status=1", "3ff6962a:approved:1"),
			getNote("deposited", rbs+"operation=deposited&status=1&amount=150000", "3ff6962a:deposited:1"),
			getNote("declined by timeout", rbs+"operation=declinedByTimeout&status=0", "3ff6962a:declinedByTimeout:0"),
			// amount is the order's registered amount on every callback,
			// and refundedAmount and operationRefundedAmount are both "the
			// refund amount": only externalRefundId names one refund.
			getNote("first partial refund, by its id", rbs+"operation=refunded&status=1&amount=150000&externalRefundId=rf-1", "3ff6962a:refunded:1:externalRefundId=rf-1"),
			getNote("second partial refund, by its id", rbs+"operation=refunded&status=1&amount=150000&externalRefundId=rf-2", "3ff6962a:refunded:1:externalRefundId=rf-2"),
			getNote("a partial refund with its amounts but no id", rbs+"operation=refunded&status=1&amount=150000&refundedAmount=20000&operationRefundedAmount=20000", ""),
			getNote("a second, equal partial refund with its date", rbs+"operation=refunded&status=1&amount=150000&operationRefundedAmount=20000&refundedDate=2026-01-15", ""),
			formNote("a failed refund, by POST", "/cb", "mdOrder=3ff6962a&operation=refunded&status=0&amount=150000&externalRefundId=rf-3&checksum=X", "3ff6962a:refunded:0:externalRefundId=rf-3"),
			getNote("a refund with the basic parameters only", rbs+"operation=refunded&status=1&amount=150000", ""),
			// A payment "can be reversed only once" (reverse.do).
			getNote("reversal", rbs+"operation=reversed&status=1&amount=150000", "3ff6962a:reversed:1"),
			formNote("a failed reversal, by POST", "/cb", "mdOrder=3ff6962a&operation=reversed&status=0&amount=150000&checksum=X", "3ff6962a:reversed:0"),
			// Card binding callbacks: no mdOrder, no status.
			getNote("card saved", "/cb?checksum=X&operation=bindingCreated&bindingId=b-1&clientId=c-1&panMasked=411111**1111", "b-1:bindingCreated"),
			formNote("another card saved, by POST", "/cb", "operation=bindingCreated&bindingId=b-2&clientId=c-1&checksum=X", "b-2:bindingCreated"),
			getNote("card saved, without bindingId", "/cb?checksum=X&operation=bindingCreated&clientId=c-1", ""),
			getNote("card disabled", "/cb?checksum=X&operation=bindingActivityChanged&bindingId=b-1&enabled=false", ""),
			getNote("card enabled", "/cb?checksum=X&operation=bindingActivityChanged&bindingId=b-1&enabled=true", ""),
		},
		// Bitrix24: no field names an event alone (ts is whole seconds,
		// auth is fresh on each delivery): every event is forwarded.
		"bitrix24": {
			formNote("deal added", "/b24", "event=ONCRMDEALADD&data%5BFIELDS%5D%5BID%5D=58&ts=1466439714", ""),
			formNote("deal updated", "/b24", "event=ONCRMDEALUPDATE&data%5BFIELDS%5D%5BID%5D=58&ts=1466439720", ""),
			formNote("app installed", "/b24", "event=ONAPPINSTALL&data%5BVERSION%5D=1&data%5BLANGUAGE_ID%5D=ru&ts=1466439700", ""),
			formNote("offline events waiting", "/b24", "event=ONOFFLINEEVENT&data%5Btimestamp%5D=1466439800&ts=1466439800", ""),
		},
	}
	for preset, notes := range tests {
		t.Run(preset, func(t *testing.T) {
			lines := []string{"preset: " + preset}
			if preset != "yookassa" {
				lines = append(lines, "signature: {secret_env: HOOKONCE_OK}")
			}
			s := mustSender(t, lines...)
			seen := map[string]string{}
			for _, n := range notes {
				key, err := s.Key(n.req(t))
				if again, err2 := s.Key(n.req(t)); again != key || (err == nil) != (err2 == nil) {
					t.Errorf("%s: the same notification read twice gives %q and %q", n.what, key, again)
				}
				h1, _, _ := s.RequestHash(n.req(t))
				if h2, _, _ := s.RequestHash(n.req(t)); h1 != h2 {
					t.Errorf("%s: the same notification hashes as %s and %s", n.what, h1, h2)
				}
				why, pass := s.Passthrough(n.req(t), err)
				if n.key == "" {
					if !pass {
						t.Errorf("%s: key %q, %v, not forwarded without dedupe: a genuine notification would be swallowed or refused", n.what, key, err)
					} else if why == "" {
						t.Errorf("%s: forwarded without dedupe with no reason to log", n.what)
					}
					continue
				}
				if pass {
					t.Errorf("%s: forwarded without dedupe (%s), want key %q", n.what, why, n.key)
				}
				if err != nil || key != n.key {
					t.Errorf("%s: key %q, %v; want %q", n.what, key, err, n.key)
					continue
				}
				if other, dup := seen[key]; dup {
					t.Errorf("%s and %s share the key %q", other, n.what, key)
				}
				seen[key] = n.what
			}
		})
	}
}

// TestPresetKeyTrailingParts: a conditional part that holds but finds no
// value is an empty part, and empty parts are dropped only at the end, so
// no two lists of parts make one key.
func TestPresetKeyTrailingParts(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "x")
	s := mustSender(t, "preset: tbank", "signature: {secret_env: HOOKONCE_OK}")
	keys := map[string]string{}
	for _, body := range []string{
		`{"PaymentId":1,"Status":"RECEIPT"}`,
		`{"PaymentId":1,"Status":"RECEIPT","FiscalDocumentNumber":5}`,
		`{"PaymentId":1,"Status":"RECEIPT:5"}`,
		`{"PaymentId":"1:RECEIPT","Status":"5"}`,
		`{"PaymentId":"1:RECEIPT","Status":""}`,
	} {
		k, err := s.Key(delivery(t, "POST", "/n", "application/json", body, ""))
		if err != nil {
			if !strings.Contains(body, `"Status":""`) {
				t.Errorf("%s: %v", body, err)
			}
			continue
		}
		if prev, dup := keys[k]; dup {
			t.Errorf("%s and %s share the key %q", prev, body, k)
		}
		keys[k] = body
	}
}

// TestPresetUnkeyedShapes: only the shapes a preset names pass without a
// key; anything else without one is still missing_key's 400, and a key no
// event id should hold is refused whatever the shape.
func TestPresetUnkeyedShapes(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "x")
	slack := mustSender(t, "preset: slack", "signature: {secret_env: HOOKONCE_OK}")
	b24 := mustSender(t, "preset: bitrix24", "signature: {secret_env: HOOKONCE_OK}")
	rbs := mustSender(t, "preset: rbs", "signature: {secret_env: HOOKONCE_OK}")
	tbank := mustSender(t, "preset: tbank", "signature: {secret_env: HOOKONCE_OK}")
	tests := []struct {
		s    *contract.Sender
		what string
		req  *contract.Request
		pass bool
	}{
		{slack, "url_verification", delivery(t, "POST", "/hook", "application/json", `{"token":"t","challenge":"3eZbrw1a","type":"url_verification"}`, ""), true},
		{slack, "app_rate_limited", delivery(t, "POST", "/hook", "application/json", `{"token":"t","type":"app_rate_limited","team_id":"T1","minute_rate_limited":1518467820,"api_app_id":"A1"}`, ""), true},
		{slack, "interactivity", delivery(t, "POST", "/hook", formType, "payload=%7B%22type%22%3A%22block_actions%22%7D", ""), true},
		{slack, "slash command", delivery(t, "POST", "/hook", formType, "command=%2Fweather&text=94070&trigger_id=1.2.3", ""), true},
		{slack, "event_callback without event_id", delivery(t, "POST", "/hook", "application/json", `{"type":"event_callback","event":{"type":"message"}}`, ""), false},
		{slack, "a form without payload or command", delivery(t, "POST", "/hook", formType, "text=1", ""), false},
		{b24, "ONAPPINSTALL", delivery(t, "POST", "/b24", formType, "event=ONAPPINSTALL&ts=1", ""), true},
		{b24, "onappuninstall", delivery(t, "POST", "/b24", formType, "event=onappuninstall&ts=1", ""), true},
		{b24, "ONOFFLINEEVENT", delivery(t, "POST", "/b24", formType, "event=ONOFFLINEEVENT&ts=1", ""), true},
		{b24, "a deal event without its ID", delivery(t, "POST", "/b24", formType, "event=ONCRMDEALUPDATE&ts=1", ""), true},
		{b24, "an install event named with a suffix", delivery(t, "POST", "/b24", formType, "event=ONAPPINSTALLX&ts=1", ""), true},
		{rbs, "a refund without externalRefundId", delivery(t, "GET", "/cb?mdOrder=m&operation=refunded&status=1&operationRefundedAmount=5", "", "", ""), true},
		{rbs, "a binding activity change", delivery(t, "GET", "/cb?operation=bindingActivityChanged&bindingId=b-1&enabled=false", "", "", ""), true},
		{rbs, "a card saved without bindingId", delivery(t, "GET", "/cb?operation=bindingCreated&clientId=c", "", "", ""), true},
		{rbs, "a card saved with its bindingId", delivery(t, "GET", "/cb?operation=bindingCreated&bindingId=b-1", "", "", ""), false},
		{rbs, "a deposit without status", delivery(t, "GET", "/cb?mdOrder=m&operation=deposited", "", "", ""), false},
		{rbs, "a deposit without mdOrder", delivery(t, "GET", "/cb?operation=deposited&status=1", "", "", ""), false},
		{rbs, "a reversal", delivery(t, "GET", "/cb?mdOrder=m&operation=reversed&status=1", "", "", ""), false},
		{tbank, "a partial refund", delivery(t, "POST", "/n", "application/json", `{"PaymentId":1,"Status":"PARTIAL_REFUNDED","Amount":5}`, ""), true},
		{tbank, "a partial reversal", delivery(t, "POST", "/n", "application/json", `{"PaymentId":1,"Status":"PARTIAL_REVERSED","Amount":5}`, ""), true},
		{tbank, "a full refund", delivery(t, "POST", "/n", "application/json", `{"PaymentId":1,"Status":"REFUNDED","Amount":5}`, ""), false},
		{tbank, "a confirmation", delivery(t, "POST", "/n", "application/json", `{"PaymentId":1,"Status":"CONFIRMED","Amount":5}`, ""), false},
	}
	for _, tt := range tests {
		_, err := tt.s.Key(tt.req)
		if tt.s == slack && err == nil {
			t.Errorf("%s %s: has a key", tt.s.Preset, tt.what)
			continue
		}
		if _, got := tt.s.Passthrough(tt.req, err); got != tt.pass {
			t.Errorf("%s %s: forwarded without dedupe %v, want %v", tt.s.Preset, tt.what, got, tt.pass)
		}
	}
	bad := delivery(t, "POST", "/hook", "application/json", `{"type":"url_verification","event_id":"Ev\u0001"}`, "")
	_, err := slack.Key(bad)
	if _, pass := slack.Passthrough(bad, err); err == nil || pass || slack.Forwardable(err, bad) {
		t.Errorf("a control character in the id: %v, passthrough %v; want refused", err, pass)
	}
}

// TestPresetMethods: Robokassa and RBS call back by GET as well as POST,
// so their presets accept both unless the file names the methods; check
// warns when it names fewer.
func TestPresetMethods(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "x")
	for preset, want := range map[string][]string{
		"robokassa": {"GET", "POST"}, "rbs": {"GET", "POST"},
		"tbank": {"POST"}, "cloudpayments": {"POST"}, "bitrix24": {"POST"}, "yookassa": {"POST"}, "slack": {"POST"},
	} {
		lines := []string{"preset: " + preset}
		if preset != "yookassa" {
			lines = append(lines, "signature: {secret_env: HOOKONCE_OK}")
		}
		if s := mustSender(t, lines...); !slices.Equal(s.Methods, want) {
			t.Errorf("%s: methods %v, want %v", preset, s.Methods, want)
		}
	}
	yaml := "senders:\n" +
		"  - {name: robo, preset: robokassa, match: {method: POST, path: /r}, signature: {secret_env: HOOKONCE_OK}}\n" +
		"  - {name: rbs, preset: rbs, match: {method: GET, path: /b}, signature: {secret_env: HOOKONCE_OK}}\n" +
		"  - {name: rbs2, preset: rbs, match: {method: \"post, get\", path: /b2}, signature: {secret_env: HOOKONCE_OK}}\n" +
		"  - {name: any, preset: robokassa, match: {method: \"*\", path: /r2}, signature: {secret_env: HOOKONCE_OK}}\n" +
		"  - {name: tb, preset: tbank, match: {method: POST, path: /t}, signature: {secret_env: HOOKONCE_OK}}\n"
	c, err := contract.Parse([]byte(yaml), "m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`m.yaml: sender "robo": match.method POST leaves out GET, which robokassa is documented to call back with: those callbacks would get 405 (write match.method: GET,POST, or leave it out)`,
		`m.yaml: sender "rbs": match.method GET leaves out POST, which rbs is documented to call back with: those callbacks would get 405 (write match.method: GET,POST, or leave it out)`,
	}
	if fmt.Sprint(c.Warnings) != fmt.Sprint(want) {
		t.Fatalf("warnings:\n%s\nwant\n%s", strings.Join(c.Warnings, "\n"), strings.Join(want, "\n"))
	}
}

// TestPresetTTLCoversWindow: a sender whose file sets no ttl keeps the
// event at least as long as its preset's provider retries, so a config
// that leaves ttl alone never warns; a ttl the file sets is kept and
// warned about when it is shorter.
func TestPresetTTLCoversWindow(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	var b strings.Builder
	b.WriteString("senders:\n")
	for i, p := range []string{"stripe", "github", "shopify", "standard-webhooks", "slack", "robokassa", "yookassa", "tbank", "cloudpayments", "rbs", "bitrix24"} {
		fmt.Fprintf(&b, "  - {name: s%d, preset: %s, match: {path: /p%d}", i, p, i)
		if p != "yookassa" {
			b.WriteString(", signature: {secret_env: HOOKONCE_OK}")
		}
		b.WriteString("}\n")
	}
	c, err := contract.Parse([]byte(b.String()), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 {
		t.Fatalf("a default config warns:\n%s", strings.Join(c.Warnings, "\n"))
	}
	for _, s := range c.Senders {
		if s.TTL < s.RetryWindow || s.TTL < contract.DefaultTTL {
			t.Errorf("%s: ttl %s, retry window %s", s.Preset, s.TTL, s.RetryWindow)
		}
	}
	if sw := c.Sender("s3"); sw.TTL != 75*time.Hour {
		t.Errorf("standard-webhooks: ttl %s, want its 75h window", sw.TTL)
	}

	c, err = contract.Parse([]byte("senders:\n  - {name: tb, preset: tbank, ttl: 2h, match: {path: /t}, signature: {secret_env: HOOKONCE_OK}}\n"+
		"  - {name: sw, preset: standard-webhooks, match: {path: /s}, signature: {secret_env: HOOKONCE_OK}}\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`t.yaml: sender "tb": ttl 2h0m0s is shorter than the tbank retry window 24h0m0s: a late retry would be processed again`}
	if fmt.Sprint(c.Warnings) != fmt.Sprint(want) || c.Sender("tb").TTL != 2*time.Hour {
		t.Fatalf("warnings = %q, ttl %s\nwant %q", c.Warnings, c.Sender("tb").TTL, want)
	}
	c, err = contract.Parse([]byte("defaults: {ttl: 72h}\nsenders:\n  - {name: sw, preset: standard-webhooks, match: {path: /s}, signature: {secret_env: HOOKONCE_OK}}\n"), "f.yaml")
	if err != nil || len(c.Warnings) != 1 {
		t.Fatalf("a ttl the file's defaults set is the file's: warnings %q, %v", c.Warnings, err)
	}
}
