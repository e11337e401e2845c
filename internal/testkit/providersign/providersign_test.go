package providersign_test

import (
	"crypto/md5"
	"net/url"
	"testing"

	"github.com/hookonce/hookonce/internal/testkit/providersign"
)

// The signers must agree with the providers' published examples, or a
// mistake shared with hookonce could make the two agree.
func TestPublishedExamples(t *testing.T) {
	f := url.Values{"OutSum": {"200.00"}, "InvId": {"84"}, "shp_interface": {"link"}}
	if got := providersign.Robokassa(md5.New, "my_password2", f); got != "95286FDC8024655CEB9034539BAC1180" {
		t.Errorf("robokassa: %s", got)
	}
	p := map[string]any{"TerminalKey": "MerchantTerminalKey", "Amount": 19200, "OrderId": "21090", "Description": "Подарочная карта на 1000 рублей"}
	if got := providersign.TBankToken("usaf8fw8fsw21g", p); got != "0024a00af7c350a3a67ca168ce06502aa72772456662e38696d48b56ee9c97d9" {
		t.Errorf("tbank: %s", got)
	}
}

// What the rules leave out or replace: nested values, a sent Token, a
// sent Password; string and typed values sign alike.
func TestTBankTokenRules(t *testing.T) {
	typed := map[string]any{"Amount": 100, "Success": true, "Status": "CONFIRMED"}
	want := providersign.TBankToken("pw", typed)
	for name, root := range map[string]map[string]any{
		"nested":   {"Amount": 100, "Success": true, "Status": "CONFIRMED", "DATA": map[string]any{"a": 1}},
		"token":    {"Amount": 100, "Success": true, "Status": "CONFIRMED", "Token": "x"},
		"password": {"Amount": 100, "Success": true, "Status": "CONFIRMED", "Password": "not-it"},
	} {
		if got := providersign.TBankToken("pw", root); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	if got := providersign.TBankToken("pw", map[string]string{"Amount": "100", "Success": "true", "Status": "CONFIRMED"}); got != want {
		t.Errorf("string values: %s, want %s", got, want)
	}
	if got := providersign.TBankToken("pw2", typed); got == want {
		t.Error("the password does not change the token")
	}
}
