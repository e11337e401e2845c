package proxy_test

// Every notification a preset's provider sends, end to end: callbacks by
// GET as well as POST, partial refunds that differ only in their amount,
// handshakes and install events that carry no event id. The signers are
// written here from the providers' documentation (they share no code with
// contract/), and the verdict is the counting site's executions.

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/providersign"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// robokassaForm is a Result URL notification: SignatureValue is
// MD5("OutSum:InvId:Password2:Shp_…") with the Shp_ parameters sorted.
func robokassaForm(password, inv string) url.Values {
	return robokassaSum(password, inv, "1500.000000")
}

func robokassaSum(password, inv, outSum string) url.Values {
	f := url.Values{"OutSum": {outSum}, "InvId": {inv}, "SHP_HANDLER": {"ROBOXCHANGE"}, "SHP_BX_PAYSYSTEM_CODE": {"1"}}
	f.Set("SignatureValue", providersign.Robokassa(md5.New, password, f))
	return f
}

// rbsParams is an RBS callback: checksum is upper-case HMAC-SHA256 of the
// parameters sorted by name as "name;value;".
func rbsParams(key string, p map[string]string) url.Values {
	names := make([]string, 0, len(p))
	for k := range p {
		names = append(names, k)
	}
	sort.Strings(names)
	var msg strings.Builder
	q := url.Values{}
	for _, k := range names {
		msg.WriteString(k + ";" + p[k] + ";")
		q.Set(k, p[k])
	}
	q.Set("checksum", strings.ToUpper(bxHex(bxMAC(key, msg.String()))))
	return q
}

// tbankJSON is a T-Bank notification: Token is SHA-256 of the root's
// scalar values and Password, ordered by name.
func tbankJSON(password string, fields map[string]any) string {
	out := map[string]any{"Token": providersign.TBankToken(password, fields)}
	for k, v := range fields {
		out[k] = v
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// TestPresetCallbacksByGETAndPOST: Robokassa's Result URL and RBS's
// callbacks come by GET or POST as the merchant (or bank) set them. A
// preset sender that names no method takes both: each callback runs the
// site once, its exact repeat is replayed, and no method gets 405.
func TestPresetCallbacksByGETAndPOST(t *testing.T) {
	type call struct {
		method, label string
		params        url.Values
	}
	for _, tc := range []struct {
		preset, secret string
		calls          []call
		ok             func(r *http.Request, w http.ResponseWriter)
	}{
		{"robokassa", "robo-password-2", []call{
			{"GET", "robo-get", robokassaForm("robo-password-2", "501")},
			{"POST", "robo-post", robokassaForm("robo-password-2", "502")},
		}, func(r *http.Request, w http.ResponseWriter) {
			_ = r.ParseForm()
			io.WriteString(w, "OK"+r.Form.Get("InvId"))
		}},
		{"rbs", "rbs-callback-key", []call{
			{"GET", "rbs-get", rbsParams("rbs-callback-key", map[string]string{"mdOrder": "md-1", "orderNumber": "7_5_0", "operation": "deposited", "status": "1"})},
			{"POST", "rbs-post", rbsParams("rbs-callback-key", map[string]string{"mdOrder": "md-2", "orderNumber": "8_5_0", "operation": "deposited", "status": "1"})},
		}, func(r *http.Request, w http.ResponseWriter) { io.WriteString(w, "ok") }},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			t.Setenv("BX_SECRET", tc.secret)
			store := newStore(t)
			site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) { tc.ok(r, w) })
			px := proxytest.Start(t, store, site.URL, "senders:\n  - name: s\n    preset: "+tc.preset+
				"\n    match: { path: /bitrix/tools/sale_ps_result.php }\n    signature: { secret_env: BX_SECRET }\n")
			const path = "/bitrix/tools/sale_ps_result.php"
			send := func(c call) proxytest.Reply {
				if c.method == "GET" {
					return bxSend(t, "GET", px.URL+path+"?"+c.params.Encode(), "", "", "X-Event-Id", c.label)
				}
				return bxSend(t, "POST", px.URL+path, bxForm, c.params.Encode(), "X-Event-Id", c.label)
			}
			for _, c := range tc.calls {
				first := send(c)
				if first.Status != 200 || first.Replayed() || site.Executions(c.label) != 1 {
					t.Fatalf("%s: %d replayed=%v %q executions %d; want the site run once", c.method, first.Status, first.Replayed(), first.Body, site.Executions(c.label))
				}
				again := send(c)
				if again.Status != 200 || !again.Replayed() || string(again.Body) != string(first.Body) || site.Executions(c.label) != 1 {
					t.Fatalf("%s repeat: %d replayed=%v %q executions %d; want the stored answer", c.method, again.Status, again.Replayed(), again.Body, site.Executions(c.label))
				}
			}
			// A tampered GET is still refused before anything is claimed.
			bad := maps.Clone(tc.calls[0].params) // Set replaces a value, never writes into it
			bad.Set(map[string]string{"robokassa": "OutSum", "rbs": "status"}[tc.preset], "0")
			if got := bxSend(t, "GET", px.URL+path+"?"+bad.Encode(), "", "", "X-Event-Id", "tampered"); got.Status != http.StatusUnauthorized || site.Executions("tampered") != 0 {
				t.Fatalf("tampered GET: %d, executions %d; want 401 and none", got.Status, site.Executions("tampered"))
			}
			// Re-signed with another amount (or order) under the same
			// event: its payload is the query, so it is a conflict, not a
			// replay of the first answer.
			changed := map[string]url.Values{
				"robokassa": robokassaSum("robo-password-2", "501", "99.000000"),
				"rbs":       rbsParams("rbs-callback-key", map[string]string{"mdOrder": "md-1", "orderNumber": "9_9_0", "operation": "deposited", "status": "1"}),
			}[tc.preset]
			if got := bxSend(t, "GET", px.URL+path+"?"+changed.Encode(), "", "", "X-Event-Id", "changed"); got.Status != http.StatusUnprocessableEntity || got.Replayed() || site.Executions("changed") != 0 {
				t.Fatalf("changed GET under one event: %d replayed=%v, executions %d; want 422 and none", got.Status, got.Replayed(), site.Executions("changed"))
			}
		})
	}
}

// TestPartialRefundsAreEvents: T-Bank moves a payment to
// PARTIAL_REFUNDED once per /v2/Cancel with an Amount, and its OpenAPI
// does not say whether a notification's Amount is this refund's or what
// is left, nor carries the call's ExternalRequestId: two equal partial
// refunds may send notifications byte for byte alike. Each one reaches
// the site (never answered from the other's record, never refused); the
// payment's other statuses, REFUNDED among them, are still keyed and a
// repeat of one is replayed.
func TestPartialRefundsAreEvents(t *testing.T) {
	t.Run("tbank", func(t *testing.T) {
		t.Setenv("BX_SECRET", "tb-terminal-password")
		store := newStore(t)
		site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "OK") })
		px := proxytest.Start(t, store, site.URL, "senders:\n  - name: s\n    preset: tbank\n    match: { path: /tbank/notify.php }\n    signature: { secret_env: BX_SECRET }\n")
		note := func(status string, amount int) string {
			return tbankJSON("tb-terminal-password", map[string]any{"TerminalKey": "1700000000DEMO", "OrderId": "ord-1", "Success": true,
				"Status": status, "PaymentId": 13660, "ErrorCode": "0", "Amount": amount, "Pan": "430000******0777"})
		}
		send := func(label, body string) proxytest.Reply {
			return bxSend(t, "POST", px.URL+"/tbank/notify.php", "application/json", body, "X-Event-Id", label)
		}
		for i, step := range []struct {
			label, body string
			runs        int
			replayed    bool
		}{
			{"confirmed", note("CONFIRMED", 150000), 1, false},
			{"refund", note("PARTIAL_REFUNDED", 20000), 1, false},
			{"refund", note("PARTIAL_REFUNDED", 20000), 2, false}, // a second, equal refund
			{"refund", note("PARTIAL_REFUNDED", 30000), 3, false},
			{"reversal", note("PARTIAL_REVERSED", 5000), 1, false},
			{"refunded", note("REFUNDED", 80000), 1, false},
			{"confirmed", note("CONFIRMED", 150000), 1, true},
			{"refunded", note("REFUNDED", 80000), 1, true},
		} {
			got := send(step.label, step.body)
			if got.Status != 200 || got.Replayed() != step.replayed || site.Executions(step.label) != step.runs {
				t.Fatalf("step %d %s: %d replayed=%v %q executions %d; want replayed=%v, %d runs", i, step.label, got.Status, got.Replayed(), got.Body,
					site.Executions(step.label), step.replayed, step.runs)
			}
		}
		if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "s", "outcome", "conflict"); n != 0 {
			t.Fatalf("%v conflicts", n)
		}
		if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "s", "outcome", "passthrough"); n != 4 {
			t.Fatalf("passthrough %v, want 4 (three partial refunds, one partial reversal)", n)
		}
	})
	// RBS: proxy/presets_keys_test.go (TestRBSRefunds): the callback's
	// amount is the order's, not the refund's.
}

// TestUnkeyedProviderMessagesReachTheSite: Slack's URL verification
// handshake carries no event_id and must be answered by the site (with its
// challenge); Bitrix24's ONAPPINSTALL carries no data[FIELDS][ID]. Both
// pass to the site without dedupe under missing_key: reject, counted as
// passthrough; the signature is still checked first, and an id-less
// message of any other shape is still refused.
func TestUnkeyedProviderMessagesReachTheSite(t *testing.T) {
	t.Run("slack url_verification", func(t *testing.T) {
		const secret = "8f742231b10e8888abcd99yyyzzz85a5"
		t.Setenv("BX_SECRET", secret)
		store := newStore(t)
		site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
			var v struct {
				Challenge string `json:"challenge"`
			}
			_ = json.NewDecoder(r.Body).Decode(&v)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"challenge":%q}`, v.Challenge)
		})
		px := proxytest.Start(t, store, site.URL, "senders:\n  - name: s\n    preset: slack\n    match: { path: /slack/events }\n    signature: { secret_env: BX_SECRET }\n")
		send := func(body, key string) proxytest.Reply {
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			sig := "v0=" + bxHex(bxMAC(key, "v0:"+ts+":"+body))
			return bxSend(t, "POST", px.URL+"/slack/events", "application/json", body,
				"X-Slack-Request-Timestamp", ts, "X-Slack-Signature", sig, "X-Event-Id", "handshake")
		}
		const body = `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
		if got := send(body, "not-the-secret"); got.Status != http.StatusUnauthorized || site.Executions("handshake") != 0 {
			t.Fatalf("unsigned handshake: %d, executions %d; want 401 before anything", got.Status, site.Executions("handshake"))
		}
		for i := 1; i <= 2; i++ {
			got := send(body, secret)
			if got.Status != 200 || got.Replayed() || !strings.Contains(string(got.Body), "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P") || site.Executions("handshake") != i {
				t.Fatalf("handshake %d: %d replayed=%v %q executions %d; want the site's own answer", i, got.Status, got.Replayed(), got.Body, site.Executions("handshake"))
			}
		}
		if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "s", "outcome", "passthrough"); n != 2 {
			t.Fatalf("passthrough counted %v, want 2", n)
		}
		// An event callback that lost its event_id is no handshake.
		if got := send(`{"type":"event_callback","event":{"type":"message"}}`, secret); got.Status != http.StatusBadRequest || site.Executions("handshake") != 2 {
			t.Fatalf("event without event_id: %d, executions %d; want 400", got.Status, site.Executions("handshake"))
		}
	})
	t.Run("bitrix24 ONAPPINSTALL", func(t *testing.T) {
		t.Setenv("BX_SECRET", "b24-application-token")
		store := newStore(t)
		site := proxytest.NewSite(t, nil)
		px := proxytest.Start(t, store, site.URL, "senders:\n  - name: s\n    preset: bitrix24\n    match: { path: /b24/handler.php }\n    signature: { secret_env: BX_SECRET }\n")
		send := func(label, event, token string) proxytest.Reply {
			f := url.Values{"event": {event}, "data[VERSION]": {"1"}, "data[ACTIVE]": {"Y"}, "data[INSTALLED]": {"Y"}, "data[LANGUAGE_ID]": {"ru"},
				"ts": {"1764451200"}, "auth[domain]": {"shop.bitrix24.ru"}, "auth[member_id]": {"m1"}, "auth[application_token]": {token}}
			return bxSend(t, "POST", px.URL+"/b24/handler.php", bxForm, f.Encode(), "X-Event-Id", label)
		}
		if got := send("forged", "ONAPPINSTALL", "b24-other-token"); got.Status != http.StatusUnauthorized || site.Executions("forged") != 0 {
			t.Fatalf("forged install: %d, executions %d; want 401", got.Status, site.Executions("forged"))
		}
		if got := send("install", "ONAPPINSTALL", "b24-application-token"); got.Status != 200 || got.Replayed() || site.Executions("install") != 1 {
			t.Fatalf("install: %d replayed=%v executions %d; want the site run", got.Status, got.Replayed(), site.Executions("install"))
		}
		if got := send("offline", "ONOFFLINEEVENT", "b24-application-token"); got.Status != 200 || site.Executions("offline") != 1 {
			t.Fatalf("offline event: %d, executions %d; want the site run", got.Status, site.Executions("offline"))
		}
		// Every Bitrix24 event is forwarded without dedupe, an entity
		// event without its ID too.
		if got := send("deal", "ONCRMDEALUPDATE", "b24-application-token"); got.Status != 200 || site.Executions("deal") != 1 {
			t.Fatalf("a deal event without its ID: %d, executions %d; want the site run", got.Status, site.Executions("deal"))
		}
		if n := proxytest.Metric(t, px.Registry, "hookonce_requests_total", "sender", "s", "outcome", "passthrough"); n != 3 {
			t.Fatalf("passthrough counted %v, want 3", n)
		}
	})
}

// TestCloudPaymentsEveryActionOnTheBitrixRecipe: the demo's Bitrix config
// (docs/senders.md's recipe) admits every action the official Bitrix module
// handles. confirm, refund and cancel each run the site once and are
// replayed on repeat; two partial refunds of one payment (each with its
// own TransactionId) are two events.
func TestCloudPaymentsEveryActionOnTheBitrixRecipe(t *testing.T) {
	cfg, err := os.ReadFile("../deploy/demo/bitrix-hookonce.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const secret = "cp-api-secret"
	for k, v := range map[string]string{"ROBOKASSA_PASSWORD2": "r", "TBANK_PASSWORD": "t", "CLOUDPAYMENTS_API_SECRET": secret,
		"RBS_CALLBACK_TOKEN": "b", "BITRIX24_APP_TOKEN": "x"} {
		t.Setenv(k, v)
	}
	store := newStore(t)
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"code":0}`) })
	px := proxytest.Start(t, store, site.URL, string(cfg))
	send := func(action, label string, f url.Values) proxytest.Reply {
		body := f.Encode()
		sig := base64.StdEncoding.EncodeToString(bxMAC(secret, body))
		return bxSend(t, "POST", px.URL+"/bitrix/tools/sale_ps_result.php?action="+action, bxForm, body, "Content-HMAC", sig, "X-Event-Id", label)
	}
	form := func(kv ...string) url.Values {
		f := url.Values{"Amount": {"1500.00"}, "Currency": {"RUB"}, "InvoiceId": {"4001"}, "AccountId": {"buyer@example.com"}}
		for i := 0; i+1 < len(kv); i += 2 {
			f.Set(kv[i], kv[i+1])
		}
		return f
	}
	steps := []struct {
		action, label string
		f             url.Values
	}{
		{"check", "check", form("TransactionId", "9001", "Status", "Authorized")},
		{"pay", "pay", form("TransactionId", "9001", "Status", "Authorized")},
		{"confirm", "confirm", form("TransactionId", "9001", "Status", "Completed")},
		{"refund", "refund-1", form("TransactionId", "9002", "PaymentTransactionId", "9001", "Amount", "100.00", "OperationType", "Refund")},
		{"refund", "refund-2", form("TransactionId", "9003", "PaymentTransactionId", "9001", "Amount", "100.00", "OperationType", "Refund")},
		{"cancel", "cancel", form("TransactionId", "9004", "InvoiceId", "4002", "Status", "Cancelled")},
		{"fail", "fail", form("TransactionId", "9005", "InvoiceId", "4003", "Status", "Declined")},
	}
	for _, replayed := range []bool{false, true} {
		for _, st := range steps {
			got := send(st.action, st.label, st.f)
			if got.Status != 200 || got.Replayed() != replayed || site.Executions(st.label) != 1 {
				t.Fatalf("%s (%s): %d replayed=%v %q executions %d; want replayed=%v and one run",
					st.action, st.label, got.Status, got.Replayed(), got.Body, site.Executions(st.label), replayed)
			}
		}
	}
	// An action the module does not handle is not CloudPayments' here: the
	// greedy Bitrix24 sender, last, takes it and finds no token.
	if got := send("receipt", "receipt", form("TransactionId", "9001")); got.Status != http.StatusUnauthorized || site.Executions("receipt") != 0 {
		t.Fatalf("an action the module does not handle: %d, executions %d; want 401 and no run", got.Status, site.Executions("receipt"))
	}
}
