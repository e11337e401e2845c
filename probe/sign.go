package probe

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A shape is how one preset's sender delivers: the method, the content,
// where the event id goes and how the delivery is signed, written from
// the provider's documentation (docs/senders.md), so the probe's events
// pass hookonce's check exactly as the sender's would. It also knows the
// key hookonce stores the event under (for the admin API) and the answer
// the preset counts as the site's success.
type shape struct {
	// build renders the delivery of event id (the probe's own, unique per
	// run) in variant v (1, or 2 for the same id with another body).
	build func(c *Config, id string, v int, now time.Time) delivery
	// recordKey is the key hookonce stores the event under.
	recordKey func(id string) string
	// success judges the site's answer to a new event as the preset's
	// success rule does; nil: any 2xx.
	success func(c *Config, id string, status int, body []byte) (bool, string)
	answer  string // what success wants, for the table
	// emptyRepeat: the preset answers a repeat 200 with an empty body
	// instead of replaying the site's answer (telegram).
	emptyRepeat bool
	// numericID: the provider's event id is a number (Telegram's
	// update_id), so the probe sends a number.
	numericID bool
	// ownKey: the preset fixes where the id goes; --key-header and
	// --key-field do not apply.
	ownKey bool
	// changedPayload is the preset's changed_payload when it is not
	// conflict ("" otherwise), the default of Config.ChangedPayload.
	changedPayload string
}

// delivery is one request as the sender would send it.
type delivery struct {
	method string
	query  url.Values // added to the target URL
	header http.Header
	body   []byte
}

// refused are the presets the probe cannot stand in for, and why.
var refused = map[string]string{
	"yookassa": "YooKassa notifications are checked by the sender's network address (YooKassa's own networks), " +
		"so a probe from this host is refused by design; confirm with a test payment in YooKassa's sandbox shop",
	"woocommerce": "the woocommerce preset names no event id and forwards every delivery without dedupe, " +
		"so there is no repeat to replay or conflict to find; check its signature with a real event (update a test order); the ping WooCommerce sends when a webhook is saved is unsigned and answered by hookonce itself",
	"amocrm": "the amocrm preset forwards every delivery without dedupe (amoCRM names no notification), " +
		"so there is no repeat to replay or conflict to find; check its URL token with a test change in amoCRM",
	"bitrix24": "the bitrix24 preset forwards every event without dedupe (Bitrix24 sends no event id and does not resend), " +
		"so there is no repeat to replay or conflict to find; check its token with a test event from the portal",
	"mollie": "the mollie preset forwards every call without dedupe (Mollie posts the same id for every status change), " +
		"so there is no repeat to replay or conflict to find; make a test payment in Mollie's test mode",
	"paypal": "PayPal signs with its own certificate's private key, which no probe holds; " +
		"send a mock event from PayPal's Webhooks simulator to the listener (its webhook_id) instead",
	"yandex-pay": "Yandex Pay signs its tokens with Yandex's private keys, which no probe holds; " +
		"make a test payment in Yandex Pay's sandbox instead",
}

func jsonBody(doc map[string]any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(doc)
	return bytes.TrimSpace(b.Bytes())
}

func probeDoc(v int) map[string]any {
	return map[string]any{"probe": true, "variant": v, "note": "hookonce probe test event; safe to ignore"}
}

// What the probe's Stripe and Shopify deliveries say besides the id: an
// API version and a topic (each the provider's, harmless to a handler
// that ignores probe events).
const (
	probeStripeVersion = "2024-06-20"
	probeShopifyTopic  = "shop/update"
)

// jsonShape is a JSON delivery whose id goes to --key-header or
// --key-field (or the preset's own place), signed by sign.
func jsonShape(sign func(h http.Header, secret, id string, body []byte, now time.Time)) shape {
	return jsonShapeWith(nil, sign)
}

// withRecordKey is sh with the key hookonce stores its events under.
func withRecordKey(sh shape, key func(id string) string) shape {
	sh.recordKey = key
	return sh
}

// jsonShapeWith is jsonShape whose body also holds the fields of extra.
func jsonShapeWith(extra map[string]any, sign func(h http.Header, secret, id string, body []byte, now time.Time)) shape {
	return shape{
		build: func(c *Config, id string, v int, now time.Time) delivery {
			doc := probeDoc(v)
			for k, x := range extra {
				doc[k] = x
			}
			h := http.Header{}
			if c.KeyHeader != "" {
				h.Set(c.KeyHeader, id)
			} else {
				setPath(doc, strings.Split(c.KeyField, "."), id)
			}
			body := jsonBody(doc)
			h.Set("Content-Type", "application/json")
			if sign != nil && c.Secret != "" {
				sign(h, c.Secret, id, body, now)
			}
			return delivery{method: http.MethodPost, header: h, body: body}
		},
		recordKey: func(id string) string { return id },
	}
}

func formDelivery(form url.Values, h http.Header) delivery {
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	return delivery{method: http.MethodPost, header: h, body: []byte(form.Encode())}
}

// joinKey joins key parts as hookonce does: "\" and ":" escaped, ":" between.
func joinKey(parts ...string) string {
	r := strings.NewReplacer(`\`, `\\`, ":", `\:`)
	for i, p := range parts {
		parts[i] = r.Replace(p)
	}
	return strings.Join(parts, ":")
}

func md5hex(s string) string { h := md5.Sum([]byte(s)); return hex.EncodeToString(h[:]) }

func sha256hex(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// answerIs judges a text success answer.
func answerIs(want func(c *Config, id string) string, what string) func(*Config, string, int, []byte) (bool, string) {
	return func(c *Config, id string, status int, body []byte) (bool, string) {
		got := string(bytes.TrimSpace(body))
		if status/100 == 2 && got == want(c, id) {
			return true, fmt.Sprintf("%d, %s", status, what)
		}
		return false, fmt.Sprintf("%d, %s", status, describeBody(body))
	}
}

// describeBody names an answer without quoting more than its start.
func describeBody(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "empty body"
	}
	if len(s) > 24 {
		s = s[:24] + "…"
	}
	return strconv.Quote(s)
}

// shapes by preset name (the sender's preset, or the bare scheme).
var shapes = map[string]shape{
	"": jsonShape(nil), // unsigned
	// Stripe: an Event rendered in its endpoint's api_version (the
	// version is part of the preset's key: one event reaches one URL in
	// two versions during an API upgrade).
	"stripe": withRecordKey(jsonShapeWith(map[string]any{"api_version": probeStripeVersion},
		func(h http.Header, secret, _ string, body []byte, now time.Time) {
			ts := strconv.FormatInt(now.Unix(), 10)
			h.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(mac([]byte(secret), []byte(ts), []byte("."), body)))
		}), func(id string) string { return joinKey(id, probeStripeVersion) }),
	"github": jsonShape(func(h http.Header, secret, _ string, body []byte, _ time.Time) {
		h.Set("X-GitHub-Event", "ping")
		h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac([]byte(secret), body)))
	}),
	// Shopify: every delivery names its topic, part of the preset's key
	// (one merchant action sends several topics under one event id).
	"shopify": withRecordKey(jsonShape(func(h http.Header, secret, _ string, body []byte, _ time.Time) {
		h.Set("X-Shopify-Topic", probeShopifyTopic)
		h.Set("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(mac([]byte(secret), body)))
	}), func(id string) string { return joinKey(probeShopifyTopic, id) }),
	"standard-webhooks": jsonShape(func(h http.Header, secret, key string, body []byte, now time.Time) {
		ts := strconv.FormatInt(now.Unix(), 10)
		h.Set("Webhook-Id", key)
		h.Set("Webhook-Timestamp", ts)
		h.Set("Webhook-Signature", "v1,"+base64.StdEncoding.EncodeToString(
			mac(whsecKey(secret), []byte(key), []byte("."), []byte(ts), []byte("."), body)))
	}),
	"slack": jsonShape(func(h http.Header, secret, _ string, body []byte, now time.Time) {
		ts := strconv.FormatInt(now.Unix(), 10)
		h.Set("X-Slack-Request-Timestamp", ts)
		h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac([]byte(secret), []byte("v0:"+ts+":"), body)))
	}),
	// hmac-sha256 with its defaults as the probe assumes them: hex digest
	// of the body in X-Signature. Other layouts: sign by hand.
	"hmac-sha256": jsonShape(func(h http.Header, secret, _ string, body []byte, _ time.Time) {
		h.Set("X-Signature", hex.EncodeToString(mac([]byte(secret), body)))
	}),

	// Robokassa's Result URL: a form with OutSum, InvId and
	// SignatureValue = MD5("OutSum:InvId:Password2"); the site answers
	// OK<InvId>.
	"robokassa": {
		ownKey: true,
		build: func(c *Config, id string, v int, _ time.Time) delivery {
			sum := fmt.Sprintf("%d.00", v)
			return formDelivery(url.Values{"OutSum": {sum}, "InvId": {id}, "IsTest": {"1"},
				"SignatureValue": {md5hex(sum + ":" + id + ":" + c.Secret)}}, nil)
		},
		recordKey: func(id string) string { return id },
		success:   answerIs(func(_ *Config, id string) string { return "OK" + id }, "OK<InvId>"),
		answer:    "2xx, OK<InvId>",
	},
	// T-Bank: JSON whose Token is SHA-256 of the root's scalar values and
	// Password, sorted by name; the site answers OK.
	"tbank": {
		ownKey: true,
		build: func(c *Config, id string, v int, _ time.Time) delivery {
			fields := map[string]string{"TerminalKey": "hookonce-probe", "OrderId": id, "Success": "true",
				"Status": "CONFIRMED", "PaymentId": id, "ErrorCode": "0", "Amount": strconv.Itoa(100 * v)}
			names := make([]string, 0, len(fields)+1)
			for k := range fields {
				names = append(names, k)
			}
			names = append(names, "Password")
			sort.Strings(names)
			var msg strings.Builder
			for _, k := range names {
				if k == "Password" {
					msg.WriteString(c.Secret)
				} else {
					msg.WriteString(fields[k])
				}
			}
			body := fmt.Sprintf(`{"TerminalKey":"hookonce-probe","OrderId":%q,"Success":true,"Status":"CONFIRMED","PaymentId":%q,"ErrorCode":"0","Amount":%d,"Token":%q}`,
				id, id, 100*v, sha256hex(msg.String()))
			h := http.Header{}
			h.Set("Content-Type", "application/json")
			return delivery{method: http.MethodPost, header: h, body: []byte(body)}
		},
		recordKey: func(id string) string { return joinKey(id, "CONFIRMED") },
		success:   answerIs(func(*Config, string) string { return "OK" }, "OK"),
		answer:    "2xx, OK",
	},
	// RBS gateways: a callback whose checksum is upper-case hex
	// HMAC-SHA256 of "name;value;" for every parameter, sorted by name.
	"rbs": {
		ownKey: true,
		build: func(c *Config, id string, v int, _ time.Time) delivery {
			form := url.Values{"mdOrder": {id}, "orderNumber": {id}, "operation": {"deposited"}, "status": {"1"},
				"amount": {strconv.Itoa(100 * v)}}
			names := make([]string, 0, len(form))
			for k := range form {
				names = append(names, k)
			}
			sort.Strings(names)
			var msg strings.Builder
			for _, k := range names {
				msg.WriteString(k + ";" + form.Get(k) + ";")
			}
			form.Set("checksum", strings.ToUpper(hex.EncodeToString(mac([]byte(c.Secret), []byte(msg.String())))))
			return formDelivery(form, nil)
		},
		recordKey: func(id string) string { return joinKey(id, "deposited", "1") },
	},
	// CloudPayments: a form on the notification's own URL (?action=pay)
	// with Content-HMAC, base64 HMAC-SHA256 of the body; the site
	// answers {"code":0}.
	"cloudpayments": {
		ownKey: true,
		build: func(c *Config, id string, v int, _ time.Time) delivery {
			form := url.Values{"TransactionId": {id}, "Amount": {fmt.Sprintf("%d.00", v)}, "Currency": {"RUB"},
				"InvoiceId": {id}, "Status": {"Completed"}, "TestMode": {"1"}}
			d := formDelivery(form, nil)
			d.header.Set("Content-HMAC", base64.StdEncoding.EncodeToString(mac([]byte(c.Secret), d.body)))
			d.query = url.Values{"action": {"pay"}}
			return d
		},
		recordKey: func(id string) string { return joinKey(id, "pay") },
		answer:    `2xx, {"code":0}`,
		success: func(_ *Config, _ string, status int, body []byte) (bool, string) {
			var v struct {
				Code *float64 `json:"code"`
			}
			if status/100 == 2 && json.Unmarshal(body, &v) == nil && v.Code != nil && *v.Code == 0 {
				return true, fmt.Sprintf(`%d, {"code":0}`, status)
			}
			return false, fmt.Sprintf("%d, %s", status, describeBody(body))
		},
	},
	// Telegram: an Update whose update_id is the id, with the secret
	// token in its header; a repeat is answered 200 with no body.
	"telegram": {
		ownKey: true, numericID: true, emptyRepeat: true,
		build: func(c *Config, id string, v int, _ time.Time) delivery {
			h := http.Header{}
			h.Set("Content-Type", "application/json")
			h.Set("X-Telegram-Bot-Api-Secret-Token", c.Secret)
			body := fmt.Sprintf(`{"update_id":%s,"message":{"message_id":%d,"date":0,"chat":{"id":0,"type":"private"},"text":"hookonce probe test update; safe to ignore"}}`, id, v)
			return delivery{method: http.MethodPost, header: h, body: []byte(body)}
		},
		recordKey: func(id string) string { return id },
	},
	// PayKeeper: a form with key = md5(id sum clientid orderid secret);
	// the site answers "OK " + md5(id + secret).
	"paykeeper": {
		ownKey: true,
		build: func(c *Config, id string, v int, _ time.Time) delivery {
			sum := fmt.Sprintf("%d.00", v)
			return formDelivery(url.Values{"id": {id}, "sum": {sum}, "clientid": {"hookonce probe"}, "orderid": {id},
				"key": {md5hex(id + sum + "hookonce probe" + id + c.Secret)}}, nil)
		},
		recordKey: func(id string) string { return id },
		success: answerIs(func(c *Config, id string) string { return "OK " + md5hex(id+c.Secret) },
			"OK md5(id+secret)"),
		answer: "2xx, OK md5(id+secret)",
	},
	// Paddle Billing: a notification whose notification_id is the id,
	// signed in Paddle-Signature (ts and h1 over "ts:body").
	"paddle": {
		ownKey: true,
		build: func(c *Config, id string, v int, now time.Time) delivery {
			body := jsonBody(map[string]any{"event_id": "evt_" + id, "event_type": "transaction.completed",
				"occurred_at": "2000-01-01T00:00:00.000000Z", "notification_id": id, "data": probeDoc(v)})
			ts := strconv.FormatInt(now.Unix(), 10)
			h := http.Header{}
			h.Set("Content-Type", "application/json")
			h.Set("Paddle-Signature", "ts="+ts+";h1="+hex.EncodeToString(mac([]byte(c.Secret), []byte(ts+":"), body)))
			return delivery{method: http.MethodPost, header: h, body: body}
		},
		recordKey: func(id string) string { return id },
	},
	// CDEK: an ORDER_STATUS webhook, the secret token in the URL's query.
	// CDEK does not resend, so another body under one key is an event of
	// its own (changed_payload: new_event).
	"cdek": {
		ownKey: true, changedPayload: "new_event",
		build: func(c *Config, id string, v int, _ time.Time) delivery {
			h := http.Header{}
			h.Set("Content-Type", "application/json")
			city := map[int]string{1: "hookonce probe", 2: "hookonce probe, changed"}[v]
			body := fmt.Sprintf(`{"type":"ORDER_STATUS","date_time":"2000-01-01T00:00:00+0000","uuid":%q,"attributes":{"is_return":false,"cdek_number":"0","number":%q,"status_code":"CREATED","status_date_time":"2000-01-01T00:00:00+0000","city_name":%q,"city_code":"0"}}`,
				id, id, city)
			return delivery{method: http.MethodPost, header: h, body: []byte(body), query: url.Values{"token": {c.Secret}}}
		},
		recordKey: func(id string) string {
			return joinKey("ORDER_STATUS", id, "2000-01-01T00:00:00+0000", "CREATED", "2000-01-01T00:00:00+0000")
		},
	},
}

// schemeKey is where each JSON scheme's preset looks for the event id.
func schemeKey(scheme string) (header, field string) {
	switch scheme {
	case "github":
		return "X-GitHub-Delivery", ""
	case "shopify":
		return "X-Shopify-Event-Id", ""
	case "standard-webhooks":
		return "Webhook-Id", ""
	case "slack":
		return "", "event_id"
	}
	return "", ""
}

// SchemeNames lists the presets and schemes the probe can test.
func SchemeNames() []string {
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		if n != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func schemeList() string { return strings.Join(SchemeNames(), ", ") }

func mac(secret []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// whsecKey decodes a Standard Webhooks secret ("whsec_" + base64); a secret
// without the prefix is used as raw bytes.
func whsecKey(secret string) []byte {
	if s, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			return b
		}
	}
	return []byte(secret)
}
