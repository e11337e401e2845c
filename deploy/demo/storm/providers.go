package main

// The payment providers of the Bitrix demo: what each one sends for a
// payment, how it signs it, and which answer makes it stop retrying. The
// signatures are written here from the providers' documentation, apart
// from hookonce's contract package (which the storm must not import), so
// the demo checks one implementation against another — and the demo site
// checks a third, in PHP.

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// dispatcherPath is the one URL every provider notifies on a 1C-Bitrix site.
const dispatcherPath = "/bitrix/tools/sale_ps_result.php"

// secrets are the shops's credentials at each provider, read from the
// environment under the names the demo site and hookonce's config use.
type secrets struct {
	robokassaPassword2 string
	tbankTerminal      string
	tbankPassword      string
	cloudpaymentsKey   string
	rbsToken           string
	bitrix24Token      string
}

func secretsFromEnv() (secrets, error) {
	var s secrets
	var missing []string
	for _, v := range []struct {
		name string
		dst  *string
	}{
		{"ROBOKASSA_PASSWORD2", &s.robokassaPassword2},
		{"TBANK_TERMINAL_KEY", &s.tbankTerminal},
		{"TBANK_PASSWORD", &s.tbankPassword},
		{"CLOUDPAYMENTS_API_SECRET", &s.cloudpaymentsKey},
		{"RBS_CALLBACK_TOKEN", &s.rbsToken},
		{"BITRIX24_APP_TOKEN", &s.bitrix24Token},
	} {
		*v.dst = os.Getenv(v.name)
		if *v.dst == "" {
			missing = append(missing, v.name)
		}
	}
	if len(missing) > 0 {
		return s, fmt.Errorf("set %s in the environment (the same values the site and hookonce get)", strings.Join(missing, ", "))
	}
	return s, nil
}

// payment is one payment awaiting payment on the site, and the provider's
// own id for it.
type payment struct {
	Provider string `json:"pay_system"`
	ID       int    `json:"id"`  // the shop's payment ID (b_sale_order_payment.ID)
	Sum      string `json:"sum"` // roubles, "123.00"
	ext      string // the provider's id for it
}

// notification is one message a provider sends about a payment; it is
// delivered until an answer satisfies ok, or the provider gives up.
type notification struct {
	kind   string // for messages: "robokassa result", "tbank CONFIRMED", …
	method string
	target string // path and query
	header http.Header
	body   []byte
	ok     func(status int, body []byte) bool
}

// provider is one payment provider on the site's dispatcher URL.
type provider struct {
	name   string
	psID   int // the pay system's ID on the demo site
	notify func(s secrets, p payment, run string) []notification
	// attempts caps the storm's --attempts for a provider that retries
	// less: RBS tries 3 times, Bitrix24 does not resend an event (0: no cap).
	attempts int
}

// Provider addresses as the site's front nginx would forward them: YooKassa
// notifies from its published ranges (the site and hookonce check it);
// the others are addresses from TEST-NET-3, as no one checks them.
var providerAddr = map[string]string{
	"robokassa":     "203.0.113.10",
	"yookassa":      "185.71.76.17",
	"tbank":         "203.0.113.20",
	"cloudpayments": "203.0.113.30",
	"rbs":           "203.0.113.40",
	"bitrix24":      "203.0.113.50",
}

// providers in the order the demo site's pay system list has them.
var providers = []provider{
	{"robokassa", 1, robokassaNotify, 0},
	{"yookassa", 2, yookassaNotify, 0},
	{"tbank", 3, tbankNotify, 0},
	{"cloudpayments", 4, cloudpaymentsNotify, 0},
	{"rbs", 5, rbsNotify, 3},
	{"bitrix24", 6, bitrix24Notify, 1},
}

func providerByName(name string) (provider, bool) {
	for _, p := range providers {
		if p.name == name {
			return p, true
		}
	}
	return provider{}, false
}

// extID makes a provider-side id that differs between runs.
func extID(run string, id int) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", run, id)
	return h.Sum64()
}

func uuidLike(n uint64, id int) string {
	return fmt.Sprintf("%08x-%04x-4%03x-9%03x-%012x", uint32(n>>32), uint16(n>>16), id&0xfff, uint16(n)&0xfff, n&0xffffffffffff)
}

func formNote(kind, target string, form url.Values, ok func(int, []byte) bool) notification {
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	return notification{kind: kind, method: http.MethodPost, target: target, header: h, body: []byte(form.Encode()), ok: ok}
}

func jsonNote(kind string, v any, ok func(int, []byte) bool) notification {
	body, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps and structs of strings and numbers
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return notification{kind: kind, method: http.MethodPost, target: dispatcherPath, header: h, body: body, ok: ok}
}

func status200(status int, _ []byte) bool { return status == http.StatusOK }

func bodyIs(want string) func(int, []byte) bool {
	return func(status int, body []byte) bool {
		return status == http.StatusOK && strings.TrimSpace(string(body)) == want
	}
}

// Robokassa: a form POST to ResultURL; SignatureValue is
// MD5("OutSum:InvId:Password2:Shp_a=1:Shp_b=2"), the Shp_ fields sorted
// by name, sent in upper case. Robokassa retries until the answer is
// "OK<InvId>".
func robokassaNotify(s secrets, p payment, _ string) []notification {
	shp := map[string]string{
		"SHP_BX_PAYMENT_CODE":   fmt.Sprintf("bx%d", p.ID),
		"SHP_BX_PAYSYSTEM_CODE": "1",
		"SHP_HANDLER":           "ROBOXCHANGE",
	}
	inv := strconv.Itoa(p.ID)
	f := url.Values{
		"OutSum":         {p.Sum},
		"InvId":          {inv},
		"Fee":            {"0.00"},
		"EMail":          {"buyer@example.com"},
		"IncCurrLabel":   {"BankCardPSR"},
		"PaymentMethod":  {"BankCard"},
		"SignatureValue": {strings.ToUpper(robokassaSignature(p.Sum, inv, s.robokassaPassword2, shp))},
	}
	for k, v := range shp {
		f.Set(k, v)
	}
	return []notification{formNote("robokassa result", dispatcherPath, f, bodyIs("OK"+inv))}
}

func robokassaSignature(outSum, invID, password2 string, shp map[string]string) string {
	names := make([]string, 0, len(shp))
	for k := range shp {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := []string{outSum, invID, password2}
	for _, k := range names {
		parts = append(parts, k+"="+shp[k])
	}
	sum := md5.Sum([]byte(strings.Join(parts, ":")))
	return hex.EncodeToString(sum[:])
}

// YooKassa: a JSON notification, unsigned, from YooKassa's addresses. Any
// 200 ends it.
func yookassaNotify(_ secrets, p payment, _ string) []notification {
	type amount struct {
		Value    string `json:"value"`
		Currency string `json:"currency"`
	}
	note := map[string]any{
		"type":  "notification",
		"event": "payment.succeeded",
		"object": map[string]any{
			"id":          p.ext,
			"status":      "succeeded",
			"paid":        true,
			"amount":      amount{p.Sum, "RUB"},
			"created_at":  "2026-12-01T00:00:00.000Z",
			"captured_at": "2026-12-01T00:00:05.000Z",
			"test":        true,
			"refundable":  true,
			"metadata": map[string]string{
				"BX_PAYMENT_NUMBER": strconv.Itoa(p.ID),
				"BX_PAYSYSTEM_CODE": "2",
				"BX_HANDLER":        "YANDEX_CHECKOUT",
				"cms_name":          "api_1c-bitrix",
			},
			"payment_method": map[string]any{"type": "bank_card", "id": p.ext, "saved": false},
		},
	}
	return []notification{jsonNote("yookassa payment.succeeded", note, status200)}
}

// T-Bank: one JSON notification per status (AUTHORIZED, then CONFIRMED).
// Token is SHA-256 of the values of the root's scalar fields plus Password,
// ordered by field name. T-Bank retries until the body is "OK".
func tbankNotify(s secrets, p payment, _ string) []notification {
	kop, _ := strconv.ParseFloat(p.Sum, 64)
	var out []notification
	for _, status := range []string{"AUTHORIZED", "CONFIRMED"} {
		fields := map[string]any{
			"TerminalKey": s.tbankTerminal,
			"OrderId":     strconv.Itoa(p.ID),
			"Success":     true,
			"Status":      status,
			"PaymentId":   json.Number(p.ext),
			"ErrorCode":   "0",
			"Amount":      int64(kop*100 + 0.5),
			"CardId":      json.Number("88" + strconv.Itoa(p.ID)),
			"Pan":         "430000******0777",
			"ExpDate":     "1230",
		}
		fields["Token"] = tbankToken(fields, s.tbankPassword)
		out = append(out, jsonNote("tbank "+status, fields, bodyIs("OK")))
	}
	return out
}

func tbankToken(fields map[string]any, password string) string {
	vals := map[string]string{"Password": password}
	for k, v := range fields {
		switch x := v.(type) {
		case string:
			vals[k] = x
		case bool:
			vals[k] = strconv.FormatBool(x)
		case int64:
			vals[k] = strconv.FormatInt(x, 10)
		case json.Number:
			vals[k] = x.String()
		}
	}
	names := make([]string, 0, len(vals))
	for k := range vals {
		if k != "Token" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	h := sha256.New()
	for _, k := range names {
		h.Write([]byte(vals[k]))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// CloudPayments: form POSTs on the dispatcher with ?action=, signed in
// Content-HMAC (base64 HMAC-SHA256 of the raw body under the API secret),
// retried until the answer is {"code":0}. Every action the official
// Bitrix module handles is sent: even payments are one-stage (check, pay
// Completed); odd ones are two-stage, after an earlier authorization of
// the same invoice was voided (check, pay Authorized, cancel), then
// authorized again and captured (check, pay Authorized, confirm
// Completed). Each payment is then partly refunded: the refund carries
// its own TransactionId and the payment's in PaymentTransactionId.
func cloudpaymentsNotify(s secrets, p payment, _ string) []notification {
	form := func(txn, status string) url.Values {
		return url.Values{
			"TransactionId":   {txn},
			"Amount":          {p.Sum},
			"Currency":        {"RUB"},
			"PaymentAmount":   {p.Sum},
			"PaymentCurrency": {"RUB"},
			"DateTime":        {"2026-12-01 00:00:00"},
			"CardFirstSix":    {"424242"},
			"CardLastFour":    {"4242"},
			"CardType":        {"Visa"},
			"CardExpDate":     {"12/30"},
			"TestMode":        {"1"},
			"Status":          {status},
			"OperationType":   {"Payment"},
			"InvoiceId":       {strconv.Itoa(p.ID)},
			"AccountId":       {"buyer@example.com"},
		}
	}
	codeZero := func(status int, body []byte) bool {
		var r struct {
			Code *int `json:"code"`
		}
		return status == http.StatusOK && json.Unmarshal(body, &r) == nil && r.Code != nil && *r.Code == 0
	}
	note := func(action string, f url.Values) notification {
		n := formNote("cloudpayments "+action, dispatcherPath+"?action="+action, f, codeZero)
		n.header.Set("Content-HMAC", cloudpaymentsHMAC(n.body, s.cloudpaymentsKey))
		return n
	}
	txn, _ := strconv.ParseUint(p.ext, 10, 64)
	id := func(n uint64) string { return strconv.FormatUint(txn+n, 10) }
	var out []notification
	if p.ID%2 == 0 {
		out = append(out, note("check", form(id(0), "Completed")), note("pay", form(id(0), "Completed")))
	} else {
		voided := form(id(3), "Authorized")
		out = append(out, note("check", voided), note("pay", voided))
		voided.Set("Status", "Cancelled")
		out = append(out, note("cancel", voided))
		out = append(out, note("check", form(id(0), "Authorized")), note("pay", form(id(0), "Authorized")), note("confirm", form(id(0), "Completed")))
	}
	refund := form(id(1), "Completed")
	refund.Set("OperationType", "Refund")
	refund.Set("PaymentTransactionId", id(0))
	refund.Set("Amount", "10.00")
	refund.Set("PaymentAmount", "10.00")
	return append(out, note("refund", refund))
}

func cloudpaymentsHMAC(body []byte, secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// RBS: a GET callback whose checksum is upper-case hex HMAC-SHA256 under
// the callback token of every other parameter, sorted by name, as
// "name;value;". Any 200 ends it.
func rbsNotify(s secrets, p payment, _ string) []notification {
	params := map[string]string{
		"mdOrder":     p.ext,
		"orderNumber": fmt.Sprintf("%d_5_0", p.ID),
		"operation":   "deposited",
		"status":      "1",
	}
	params["checksum"] = rbsChecksum(params, s.rbsToken)
	q := url.Values{}
	for k, v := range params {
		q.Set(k, v)
	}
	return []notification{{
		kind: "rbs deposited", method: http.MethodGet, target: dispatcherPath + "?" + q.Encode(),
		header: http.Header{}, ok: status200,
	}}
}

func rbsChecksum(params map[string]string, token string) string {
	names := make([]string, 0, len(params))
	for k := range params {
		if k != "checksum" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	m := hmac.New(sha256.New, []byte(token))
	for _, k := range names {
		m.Write([]byte(k + ";" + params[k] + ";"))
	}
	return strings.ToUpper(hex.EncodeToString(m.Sum(nil)))
}

// Bitrix24: the portal's outbound event, a form POST carrying the
// application token. Any 200 ends it.
func bitrix24Notify(s secrets, p payment, run string) []notification {
	f := url.Values{
		"event":                   {"ONCRMINVOICESETSTATUS"},
		"event_handler_id":        {"17"},
		"data[FIELDS][ID]":        {strconv.Itoa(p.ID)},
		"data[FIELDS][STATUS_ID]": {"P"},
		"ts":                      {strconv.FormatInt(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Unix()+int64(extID(run, p.ID)%86400), 10)},
		"auth[domain]":            {"demo.bitrix24.ru"},
		"auth[client_endpoint]":   {"https://demo.bitrix24.ru/rest/"},
		"auth[server_endpoint]":   {"https://oauth.bitrix.info/rest/"},
		"auth[member_id]":         {"a223c6b3710f85df22e9377d6c4f7553"},
		"auth[application_token]": {s.bitrix24Token},
	}
	return []notification{formNote("bitrix24 "+f.Get("event"), dispatcherPath, f, status200)}
}
