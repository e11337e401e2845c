package contract_test

import (
	"crypto/sha512"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

// Published or independently computed examples for each Bitrix preset:
//   - Robokassa: the MD5 vector in @dev-aces/robokassa's own test suite
//     (calculateReceivingSignatureValue.spec), and a SHA-256 one made with
//     `openssl dgst -sha256` over Bitrix's SHP_ parameters;
//   - T-Bank: the Token example of T-Bank's "request signature" page
//     (TerminalKey MerchantTerminalKey, Amount 19200, password
//     usaf8fw8fsw21g), nested DATA and Receipt left out;
//   - RBS: the checksum in the Radar (RBS-based gateway) PHP client's test,
//     whose query has a typo ("status=1$amount=…") that PHP's parse_str
//     keeps in the status value; and the RBS documentation's example string
//     signed with `openssl dgst -sha256 -hmac`;
//   - CloudPayments: `openssl dgst -sha256 -hmac … -binary | base64` over a
//     form and a JSON body;
//   - YooKassa: addresses inside the networks of the official PHP SDK's
//     SecurityHelper (its IPv6 ranges are /64s inside the documented /32).
func TestBitrixPresetVectors(t *testing.T) {
	t.Setenv("ROBO_P2", "my_password2")
	t.Setenv("ROBO_P2_SHA", "robo-pass-2")
	t.Setenv("TB_PASS", "usaf8fw8fsw21g")
	t.Setenv("RBS_TEST", "test")
	t.Setenv("RBS_DOC", "rbs-doc-key")
	t.Setenv("CP_SECRET", "cp-api-secret")
	t.Setenv("B24_TOKEN", "b24-app-token")
	const rbsDoc = "amount=123456&orderNumber=10747&checksum=9F68FFF4E62AB5AA037CD357F294A9DC11B3FA42C0749266618622AA197DF562&mdOrder=3ff6962a-7dcc-4283-ab50-a6d7dd3386fe&operation=deposited&status=1"
	tests := []struct {
		name  string
		lines []string
		req   func(t *testing.T) *contract.Request
		key   string
	}{
		{"robokassa md5, npm package's vector", []string{"preset: robokassa", "signature: {secret_env: ROBO_P2}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/result", formType, "OutSum=200.00&InvId=84&shp_interface=link&SignatureValue=95286FDC8024655CEB9034539BAC1180", "")
			}, "84"},
		{"robokassa sha256 by GET, Bitrix's SHP_ names", []string{"preset: robokassa", "signature: {secret_env: ROBO_P2_SHA, algorithm: sha256}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "GET", "/result?OutSum=1000.000000&InvId=77&SHP_HANDLER=ROBOXCHANGE&SignatureValue=82633c3e66fb4eaa018ace8b52086f5646c122cb2077027a3086f0941366e123&SHP_BX_PAYSYSTEM_CODE=5&IsTest=1", "", "", "")
			}, "77"},
		{"tbank documentation token", []string{"preset: tbank", "signature: {secret_env: TB_PASS}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/tb", "application/json", `{"TerminalKey":"MerchantTerminalKey","Amount":19200,"OrderId":"21090",`+
					`"Description":"Подарочная карта на 1000 рублей","DATA":{"Phone":"+71234567890","Email":"a@test.com"},`+
					`"Receipt":{"Email":"a@test.ru","Items":[{"Name":"x","Price":10000}]},`+
					`"Token":"0024a00af7c350a3a67ca168ce06502aa72772456662e38696d48b56ee9c97d9"}`, "")
			}, ""},
		{"rbs, radar client's vector", []string{"preset: rbs", "signature: {secret_env: RBS_TEST}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "GET", "/cb?mdOrder=3ff6962a-7dcc-4283-ab50-a6d7dd3386fe&orderNumber=10747&checksum=14E0D9722D43BE67BFF111F53570BB5BCCFEED8AD15D72A48D51D4E949DAF988&operation=deposited&status=1$amount=123456", "", "", "")
			}, `3ff6962a-7dcc-4283-ab50-a6d7dd3386fe:deposited:1$amount=123456`},
		{"rbs documentation string by POST", []string{"preset: rbs", "signature: {secret_env: RBS_DOC}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/cb", formType, rbsDoc, "")
			}, "3ff6962a-7dcc-4283-ab50-a6d7dd3386fe:deposited:1"},
		{"rbs checksum in lower case", []string{"preset: rbs", "signature: {secret_env: RBS_DOC}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/cb", formType, strings.Replace(rbsDoc, "9F68FFF4E62AB5AA037CD357F294A9DC11B3FA42C0749266618622AA197DF562",
					"9f68fff4e62ab5aa037cd357f294a9dc11b3fa42c0749266618622aa197df562", 1), "")
			}, ""},
		{"cloudpayments form", []string{"preset: cloudpayments", "signature: {secret_env: CP_SECRET}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/bitrix/tools/sale_ps_result.php?action=pay", formType,
					"TransactionId=504&Amount=10.00&Currency=RUB&InvoiceId=1234567&AccountId=user%40example.com&Status=Completed&Data=%7B%22k%22%3A1%7D", "",
					"Content-HMAC", "kG+4Tglju7AaqK2OKD5ccWzANXWnzAWE+LmnbZy/o9o=", "X-Content-HMAC", "not what the raw body gives")
			}, "504:pay"},
		{"cloudpayments json, X-Content-HMAC alone", []string{"preset: cloudpayments", "signature: {secret_env: CP_SECRET}", "key: [{body: TransactionId}, {query: action}]"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/bitrix/tools/sale_ps_result.php?action=check", "application/json",
					`{"TransactionId":504,"Amount":10.0,"Status":"Completed"}`, "",
					"X-Content-HMAC", "sPyhAAIRqc+s6XpbloWy9Tate22nW+wiUmYnFg5FU5k=")
			}, "504:check"},
		{"bitrix24 application token", []string{"preset: bitrix24", "signature: {secret_env: B24_TOKEN}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/b24", formType, "event=ONCRMDEALUPDATE&event_handler_id=12&data%5BFIELDS%5D%5BID%5D=58&ts=1466439714"+
					"&auth%5Bdomain%5D=x.bitrix24.ru&auth%5Bmember_id%5D=m1&auth%5Bapplication_token%5D=b24-app-token", "")
			}, ""}, // forwarded without dedupe: no key
		{"yookassa ipv4", []string{"preset: yookassa"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/yk", "application/json", `{"type":"notification","event":"payment.succeeded","object":{"id":"22e12f66-000f-5000-8000-18db351245c7"}}`, "77.75.154.200")
			}, "22e12f66-000f-5000-8000-18db351245c7:payment.succeeded"},
		{"yookassa ipv6 from the SDK's ranges", []string{"preset: yookassa"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/yk", "application/json", `{"event":"payment.waiting_for_capture","object":{"id":"p1"}}`, "2a02:5180:0:2669::1:2")
			}, "p1:payment.waiting_for_capture"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSender(t, tt.lines...)
			req := tt.req(t)
			if err := s.Verify(req, time.Now()); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if tt.key == "" {
				return
			}
			if key, err := s.Key(req); err != nil || key != tt.key {
				t.Fatalf("Key = %q, %v; want %q", key, err, tt.key)
			}
		})
	}
}

func TestBitrixPresetRefusals(t *testing.T) {
	t.Setenv("ROBO_P2", "my_password2")
	t.Setenv("TB_PASS", "usaf8fw8fsw21g")
	t.Setenv("CP_SECRET", "cp-api-secret")
	t.Setenv("B24_TOKEN", "b24-app-token")
	t.Setenv("B24_OLD", "b24-old-token")
	const tbBody = `{"TerminalKey":"MerchantTerminalKey","Amount":19200,"OrderId":"21090","Description":"Подарочная карта на 1000 рублей","Token":"0024a00af7c350a3a67ca168ce06502aa72772456662e38696d48b56ee9c97d9"}`
	tests := []struct {
		name  string
		lines []string
		req   func(t *testing.T) *contract.Request
		want  string
	}{
		{"robokassa amount changed", []string{"preset: robokassa", "signature: {secret_env: ROBO_P2}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/r", formType, "OutSum=2000.00&InvId=84&shp_interface=link&SignatureValue=95286FDC8024655CEB9034539BAC1180", "")
			}, contract.ReasonMismatch},
		{"robokassa Shp_ parameter added", []string{"preset: robokassa", "signature: {secret_env: ROBO_P2}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/r", formType, "OutSum=200.00&InvId=84&shp_interface=link&Shp_x=1&SignatureValue=95286FDC8024655CEB9034539BAC1180", "")
			}, contract.ReasonMismatch},
		{"robokassa no signature", []string{"preset: robokassa", "signature: {secret_env: ROBO_P2}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/r", formType, "OutSum=200.00&InvId=84", "")
			}, "no request field SignatureValue"},
		{"robokassa no InvId", []string{"preset: robokassa", "signature: {secret_env: ROBO_P2}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/r", formType, "OutSum=200.00&SignatureValue=95286FDC8024655CEB9034539BAC1180", "")
			}, "no request field InvId"},
		{"robokassa sha256 signature for an md5 sender", []string{"preset: robokassa", "signature: {secret_env: ROBO_P2}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/r", formType, "OutSum=200.00&InvId=84&SignatureValue="+strings.Repeat("ab", 32), "")
			}, "malformed request field SignatureValue: want 32 hex digits"},
		{"tbank token in upper case", []string{"preset: tbank", "signature: {secret_env: TB_PASS}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/t", "application/json", strings.Replace(tbBody, "0024a00af7c350a3a67ca168ce06502aa72772456662e38696d48b56ee9c97d9", "0024A00AF7C350A3A67CA168CE06502AA72772456662E38696D48B56EE9C97D9", 1), "")
			}, "want lower-case hex"},
		{"tbank boolean added", []string{"preset: tbank", "signature: {secret_env: TB_PASS}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/t", "application/json", strings.Replace(tbBody, `"Amount":19200`, `"Amount":19200,"Success":true`, 1), "")
			}, contract.ReasonMismatch},
		{"tbank form body", []string{"preset: tbank", "signature: {secret_env: TB_PASS}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/t", formType, "Token=abc", "")
			}, "no body field Token"},
		{"cloudpayments body changed", []string{"preset: cloudpayments", "signature: {secret_env: CP_SECRET}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/c?action=pay", formType, "TransactionId=504&Amount=1000.00", "", "Content-HMAC", "kG+4Tglju7AaqK2OKD5ccWzANXWnzAWE+LmnbZy/o9o=")
			}, contract.ReasonMismatch},
		{"cloudpayments no header", []string{"preset: cloudpayments", "signature: {secret_env: CP_SECRET}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/c?action=pay", formType, "TransactionId=504", "")
			}, "no Content-Hmac header"},
		{"cloudpayments header twice", []string{"preset: cloudpayments", "signature: {secret_env: CP_SECRET}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/c?action=pay", formType, "TransactionId=504", "", "Content-HMAC", "a", "Content-HMAC", "b")
			}, "malformed Content-Hmac header: header sent more than once"},
		{"bitrix24 wrong token", []string{"preset: bitrix24", "signature: {secret_env: B24_TOKEN, previous_secret_env: B24_OLD}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/b", formType, "event=X&auth%5Bapplication_token%5D=b24-app-tokenX", "")
			}, contract.ReasonMismatch},
		{"bitrix24 token in the query only", []string{"preset: bitrix24", "signature: {secret_env: B24_TOKEN}"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/b?auth%5Bapplication_token%5D=b24-app-token", formType, "event=X", "")
			}, "no form field auth[application_token]"},
		{"yookassa from elsewhere", []string{"preset: yookassa"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/y", "application/json", `{}`, "77.75.154.127")
			}, "sender address 77.75.154.127 is not in the allowlist"},
		{"yookassa address unknown", []string{"preset: yookassa"},
			func(t *testing.T) *contract.Request {
				return delivery(t, "POST", "/y", "application/json", `{}`, "")
			}, "sender address unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSender(t, tt.lines...)
			err := s.Verify(tt.req(t), time.Now())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Verify = %v, want %q", err, tt.want)
			}
			assertNoSecrets(t, err.Error(), nil, "my_password2", "usaf8fw8fsw21g", "cp-api-secret", "b24-app-token", "b24-old-token",
				"95286FDC8024655CEB9034539BAC1180", "kG+4Tglju7AaqK2OKD5ccWzANXWnzAWE")
		})
	}
}

func TestBitrix24PreviousToken(t *testing.T) {
	t.Setenv("B24_TOKEN", "b24-app-token")
	t.Setenv("B24_OLD", "b24-old-token")
	s := mustSender(t, "preset: bitrix24", "signature: {secret_env: B24_TOKEN, previous_secret_env: B24_OLD}")
	for _, tok := range []string{"b24-app-token", "b24-old-token"} {
		if err := s.Verify(delivery(t, "POST", "/b", formType, "event=X&auth%5Bapplication_token%5D="+tok, ""), time.Now()); err != nil {
			t.Fatalf("token %s: %v", tok, err)
		}
	}
}

// TestPresetOverrides: the merchant's own algorithm (Robokassa lets it
// pick SHA-256), allowlist and message replace the preset's.
func TestPresetOverrides(t *testing.T) {
	t.Setenv("ROBO_P2", "my_password2")
	s := mustSender(t, "preset: robokassa", "signature: {secret_env: ROBO_P2, algorithm: sha512}")
	sum := sha512.Sum512([]byte("200.00:84:my_password2:shp_interface=link"))
	body := "OutSum=200.00&InvId=84&shp_interface=link&SignatureValue=" + strings.ToUpper(hex.EncodeToString(sum[:]))
	if err := s.Verify(delivery(t, "POST", "/r", formType, body, ""), time.Now()); err != nil {
		t.Fatalf("sha512 Robokassa: %v", err)
	}
	y := mustSender(t, "preset: yookassa", "signature: {allow: [192.0.2.0/24]}")
	if err := y.Verify(delivery(t, "POST", "/y", "application/json", "{}", "192.0.2.9"), time.Now()); err != nil {
		t.Fatalf("own allowlist: %v", err)
	}
	if err := y.Verify(delivery(t, "POST", "/y", "application/json", "{}", "185.71.76.1"), time.Now()); err == nil {
		t.Fatal("the preset's list is still in force after the sender replaced it")
	}
}

// TestBitrixPresetRules pins each preset's retry window and success rule,
// the parts of a preset that only show when something goes wrong.
func TestBitrixPresetRules(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "user:secret")
	req := delivery(t, "POST", "/hook?InvId=5", formType, "", "")
	tests := []struct {
		preset  string
		window  time.Duration
		status  int
		body    string
		success bool
	}{
		{"robokassa", 0, 200, "OK5", true},
		{"robokassa", 0, 200, "", false},
		{"robokassa", 0, 200, "OK6", false},
		{"yookassa", 24 * time.Hour, 200, "", true},
		{"yookassa", 24 * time.Hour, 404, "", false},
		{"tbank", 24 * time.Hour, 200, "OK", true},
		{"tbank", 24 * time.Hour, 200, "ERROR", false},
		{"cloudpayments", 0, 200, `{"code":0}`, true},
		{"cloudpayments", 0, 200, `{"code":13}`, false},
		{"rbs", 90 * time.Second, 200, "", true},
		{"rbs", 90 * time.Second, 409, "", false},
		{"bitrix24", 0, 404, "", true}, // no rule: every final status counts
	}
	for _, tt := range tests {
		lines := []string{"preset: " + tt.preset}
		if tt.preset != "yookassa" {
			lines = append(lines, "signature: {secret_env: HOOKONCE_OK}")
		}
		s := mustSender(t, lines...)
		if s.RetryWindow != tt.window {
			t.Errorf("%s: retry window %s, want %s", tt.preset, s.RetryWindow, tt.window)
		}
		if ok, why := s.Succeeded(req, tt.status, []byte(tt.body)); ok != tt.success {
			t.Errorf("%s: %d %q succeeded=%v (%s), want %v", tt.preset, tt.status, tt.body, ok, why, tt.success)
		}
	}
}
