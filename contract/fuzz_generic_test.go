package contract_test

// Fuzz targets for the generic message schemes (digest, hmac over fields,
// parts and the raw body), through the Bitrix presets that use them. For
// any delivery, Verify must not panic, must refuse with a SignatureError
// that quotes no secret, and must accept only when the signature the
// delivery carries is the one the test assembles itself from the
// delivery's values by each sender's documented rule. The test reads the
// values through Request (PHP's parsing is not what is fuzzed here) and
// does the sorting, joining, hashing and encoding on its own.

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/netip"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/internal/testkit/providersign"
)

// genericSeeds are the seed corpora of the targets below (see seedsFor).
var genericSeeds = map[string]func() []seed{
	"FuzzFieldsSignature": func() []seed {
		robo := url.Values{"OutSum": {"100.000000"}, "InvId": {"42"}, "SHP_HANDLER": {"ROBOXCHANGE"}, "shp_b": {"x y"}}
		robo.Set("SignatureValue", providersign.Robokassa(md5.New, fuzzSecrets["generic"], robo))
		rbs := url.Values{"mdOrder": {"3ff6962a"}, "operation": {"deposited"}, "status": {"1"}, "amount": {"150"}, "sign_alias": {"k"}}
		rbs.Set("checksum", fuzzRBS(fuzzSecrets["generic"], rbs))
		return []seed{
			{"", formType, []byte(robo.Encode())},
			{robo.Encode(), "", []byte{}},
			{"InvId=43", formType, []byte(robo.Encode())},
			{rbs.Encode(), "", []byte{}},
			{"", formType + "; charset=utf-8", []byte(rbs.Encode() + "&extra=1")},
			{"a[b]=1&a[]=2&%zz=&+x=y", "multipart/form-data; boundary=xx", []byte("--xx\r\nContent-Disposition: form-data; name=\"InvId\"\r\n\r\n7\r\n--xx--\r\n")},
			{"SignatureValue=" + strings.Repeat("0", 32) + "&OutSum=&InvId=", "", []byte{}},
		}
	},
	"FuzzBodySignature": func() []seed {
		tb := `{"TerminalKey":"T","Amount":100,"Success":true,"Status":"CONFIRMED","PaymentId":7,"DATA":{"a":1},"Token":"` +
			providersign.TBankToken(fuzzSecrets["generic"], map[string]string{"TerminalKey": "T", "Amount": "100", "Success": "true", "Status": "CONFIRMED", "PaymentId": "7"}) + `"}`
		cp := "TransactionId=504&Amount=10.00"
		return []seed{
			{[]byte(tb), ""},
			{[]byte(strings.Replace(tb, "100", "1e2", 1)), ""},
			{[]byte(strings.Replace(tb, "true", "false", 1)), ""},
			{[]byte(`{"Token":"` + strings.Repeat("a", 64) + `","Password":"x","n":null,"f":1.5}`), ""},
			{[]byte(cp), base64.StdEncoding.EncodeToString(mac([]byte(fuzzSecrets["generic"]), cp))},
			{[]byte(cp), base64.StdEncoding.EncodeToString(mac([]byte(fuzzSecrets["old"]), cp))},
			{[]byte(`[1,2]`), "===="},
			{[]byte{0xff, '{'}, ""},
		}
	},
}

// fuzzRBS: HMAC-SHA256 of name;value; for every field but checksum and
// sign_alias, sorted by name, upper-case hex.
func fuzzRBS(secret string, f url.Values) string {
	var names []string
	for k := range f {
		if k != "checksum" && k != "sign_alias" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		b.WriteString(k + ";" + f.Get(k) + ";")
	}
	return strings.ToUpper(hex.EncodeToString(mac([]byte(secret), b.String())))
}

func fuzzPresetSender(t testing.TB, preset string) *contract.Sender {
	t.Helper()
	return fuzzSender(t, "preset: "+preset, "signature: {secret_file: testdata/secrets/generic, previous_secret_file: testdata/secrets/old}")
}

// asValues reads a request source's fields as url.Values, one value each.
func asValues(req *contract.Request, src contract.Source) url.Values {
	fields, err := req.Fields(src)
	if err != nil {
		return nil
	}
	v := url.Values{}
	for k, x := range fields {
		v.Set(k, x)
	}
	return v
}

func FuzzFieldsSignature(f *testing.F) {
	robo := fuzzPresetSender(f, "robokassa")
	rbs := fuzzPresetSender(f, "rbs")
	secrets := []string{fuzzSecrets["generic"], fuzzSecrets["old"]}
	f.Fuzz(func(t *testing.T, query, ctype string, body []byte) {
		r, err := http.NewRequest("POST", "http://h/hook", bytes.NewReader(body))
		if err != nil {
			return
		}
		r.URL.RawQuery = query
		r.Header.Set("Content-Type", ctype)
		req := contract.NewRequest(r, "/hook", body, netip.Addr{})
		verdictOn(t, robo, req, fuzzNow, func() bool {
			vals := asValues(req, contract.FromRequest)
			for _, s := range secrets {
				if strings.EqualFold(vals.Get("SignatureValue"), providersign.Robokassa(md5.New, s, vals)) {
					return true
				}
			}
			return false
		})
		verdictOn(t, rbs, req, fuzzNow, func() bool {
			vals := asValues(req, contract.FromRequest)
			for _, s := range secrets {
				if strings.EqualFold(vals.Get("checksum"), fuzzRBS(s, vals)) {
					return true
				}
			}
			return false
		})
	})
}

func FuzzBodySignature(f *testing.F) {
	tb := fuzzPresetSender(f, "tbank")
	cp := fuzzPresetSender(f, "cloudpayments")
	secrets := []string{fuzzSecrets["generic"], fuzzSecrets["old"]}
	f.Fuzz(func(t *testing.T, body []byte, contentHMAC string) {
		r, _ := http.NewRequest("POST", "http://h/hook?action=pay", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Content-HMAC", contentHMAC)
		req := contract.NewRequest(r, "/hook", body, netip.Addr{})
		verdictOn(t, tb, req, fuzzNow, func() bool {
			fields, err := req.Fields(contract.FromBody)
			if err != nil {
				return false
			}
			for _, s := range secrets {
				if fields["Token"] == providersign.TBankToken(s, fields) {
					return true
				}
			}
			return false
		})
		verdictOn(t, cp, req, fuzzNow, func() bool {
			for _, s := range secrets {
				if strings.TrimSpace(contentHMAC) == base64.StdEncoding.EncodeToString(mac([]byte(s), string(body))) {
					return true
				}
			}
			return false
		})
	})
}
