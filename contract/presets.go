package contract

import (
	"regexp"
	"time"
)

// preset is what naming a well-known sender fills in: where its event id
// lives, how it signs, how long it keeps retrying, and the methods it
// calls back with. It adds no match condition, and every field the sender
// sets itself wins.
type preset struct {
	Keys        []KeyPart
	Signature   SignatureConfig
	RetryWindow time.Duration
	Success     *Success // nil: every final status is a success
	// Methods the provider is documented to call back with; nil: POST.
	// They are the sender's match.method unless the file names one, and
	// check warns when the file's excludes one of them.
	Methods []string
	// NoDedupe names the provider's notifications that no key can tell
	// apart, forwarded to the site without dedupe (logged with their
	// Reason and counted as outcome passthrough; serialized when the
	// sender sets serialize): a handshake or an application event
	// without an id (IfKeyMissing), a refund callback without a refund
	// id. One shape without conditions forwards every delivery: a preset
	// for a provider whose notifications carry no unique id at all (then
	// Keys may be empty). The file's no_dedupe adds shapes; dedupe: on
	// drops the shapes without conditions.
	NoDedupe []NoDedupeShape
	// ChangedPayload is what a changed payload under a stored key means
	// for this provider ("": conflict). Hash and Ignore name the fields
	// the provider renders anew for each delivery of one event (a retry
	// counter): the payload hash leaves them out.
	ChangedPayload ChangedPolicy
	Hash           HashMode
	Ignore         []string
}

// cond builds a preset's condition (a literal, so it cannot fail).
func cond(src Source, name, equals, matches string, present *bool) Condition {
	c := Condition{Source: src, Name: name, Present: present}
	if equals != "" {
		c.Equals = &equals
	}
	if matches != "" {
		c.Matches = regexp.MustCompile(matches)
	}
	return c
}

var yes = func() *bool { b := true; return &b }()

// presets by name. Each one carries its signature scheme, so a preset
// sender without a secret is a config error rather than an unchecked door.
//
// Retry windows, as the senders document them:
//   - Stripe retries live-mode events for up to three days.
//   - GitHub does not retry, but a delivery can be redelivered by hand for
//     three days.
//   - Shopify retries 8 times over 4 hours.
//   - Standard Webhooks (Svix schedule: 5s, 5m, 30m, 2h, 5h, 10h, 10h) ends
//     after about 28 hours; the design asks for ≈75h to cover senders that
//     stretch it and manual replays.
//   - Slack retries 3 times: at once, after 1 and after 5 minutes.
//
// The built-in ttl (DefaultTTL) is at least every preset's window, and a
// sender whose file sets no ttl gets at least its preset's window, so a
// config that leaves ttl alone never warns.
var presets = map[string]preset{
	// Stripe: the Event object's id is unique per event (API reference,
	// "The Event object": id, "Unique identifier for the object"), and
	// its retries resend that event. pending_webhooks, "Number of
	// webhooks that haven't been successfully delivered", is rendered
	// anew for every delivery, so a retry after another endpoint
	// succeeded differs in it: the payload hash leaves it out.
	"stripe": {
		Keys:        []KeyPart{{Source: FromBody, Name: "id"}},
		Signature:   SignatureConfig{Scheme: SchemeStripe},
		RetryWindow: 72 * time.Hour,
		Hash:        HashJSON,
		Ignore:      []string{"pending_webhooks"},
	},
	// GitHub: X-GitHub-Delivery is the event's id, "shared with all
	// deliveries for all webhooks that subscribe to this event" (REST
	// API, hook delivery guid); X-GitHub-Hook-ID names the webhook the
	// delivery is for. One event to two hooks on one URL is two
	// deliveries; a redelivery keeps both.
	"github": {
		// The hook id is read when present (GitHub sends it on every
		// delivery); a delivery without it (a hand-made test, a tool) is
		// keyed by its delivery id alone, as before the hook id counted,
		// which no delivery that has one shares.
		Keys:        []KeyPart{{Source: FromHeader, Name: "X-Github-Hook-Id", Optional: true}, {Source: FromHeader, Name: "X-Github-Delivery"}},
		Signature:   SignatureConfig{Scheme: SchemeGitHub},
		RetryWindow: 72 * time.Hour,
	},
	// Shopify: X-Shopify-Event-Id names the event, "the same value across
	// more than one webhook indicates a duplicate", and a shop with
	// several subscriptions to one topic gets one webhook per
	// subscription (shopify.dev, "Ignore duplicate webhooks"). Those
	// copies may differ (include_fields, API version), so a changed
	// payload under one event id is a duplicate and gets the first's
	// answer.
	"shopify": {
		Keys:           []KeyPart{{Source: FromHeader, Name: "X-Shopify-Event-Id", Fallback: []string{"X-Shopify-Webhook-Id"}}},
		Signature:      SignatureConfig{Scheme: SchemeShopify},
		RetryWindow:    4 * time.Hour,
		ChangedPayload: ChangedDuplicate,
	},
	"standard-webhooks": {
		Keys:        []KeyPart{{Source: FromHeader, Name: "Webhook-Id"}},
		Signature:   SignatureConfig{Scheme: SchemeStandardWebhooks},
		RetryWindow: 75 * time.Hour,
	},
	// Slack: Events API callbacks carry event_id. The URL verification
	// handshake (type url_verification, answered with its challenge) and
	// app_rate_limited carry none; interactivity payloads (a form with
	// payload=<JSON>) and slash commands (a form with command=/…) are
	// signed the same way and carry none either, and Slack does not retry
	// them. Those shapes go to the site undeduplicated (api.slack.com:
	// "url_verification event", "Rate limiting: app_rate_limited",
	// "Handling user interaction", "Slash commands").
	"slack": {
		Keys:        []KeyPart{{Source: FromBody, Name: "event_id"}},
		Signature:   SignatureConfig{Scheme: SchemeSlack},
		RetryWindow: 10 * time.Minute,
		NoDedupe: []NoDedupeShape{
			{When: []Condition{cond(FromBody, "type", "url_verification", "", nil)}, IfKeyMissing: true, Reason: "slack url_verification handshake (no event_id)"},
			{When: []Condition{cond(FromBody, "type", "app_rate_limited", "", nil)}, IfKeyMissing: true, Reason: "slack app_rate_limited (no event_id)"},
			{When: []Condition{cond(FromForm, "payload", "", "", yes)}, IfKeyMissing: true, Reason: "slack interactivity payload (no event_id)"},
			{When: []Condition{cond(FromForm, "command", "", "", yes)}, IfKeyMissing: true, Reason: "slack slash command (no event_id)"},
		},
	},
	// The generic scheme as a preset: the sender names the header (and
	// encoding, prefix) and its own key.
	"hmac-sha256": {
		Signature: SignatureConfig{Scheme: SchemeHMACSHA256},
	},
	"robokassa":     robokassa,
	"yookassa":      yookassa,
	"tbank":         tbank,
	"cloudpayments": cloudpayments,
	"rbs":           rbs,
	"bitrix24":      bitrix24,
	"telegram":      telegram,
	"paykeeper":     paykeeper,
	"cdek":          cdek,
	"amocrm":        amocrm,
	"woocommerce":   woocommerce,
	"paddle":        paddle,
	"mollie":        mollie,
	"paypal":        paypal,
	"yandex-pay":    yandexpay,
}

// The payment senders of a 1C-Bitrix shop. Each reads its values where
// the shop's own handler reads them ($request->get() is FromRequest: the
// query, then the form), so hookonce and the site agree on the event.

// robokassa: the Result URL notification, sent once a payment succeeded,
// by POST or GET as the merchant chose (both are accepted). It is the
// only notification Robokassa sends a Bitrix shop: refunds and receipts
// are requests the shop makes, not callbacks to ResultURL, so InvId alone
// names the event. SignatureValue is MD5("OutSum:InvId:Password2[:Shp_k=v…]")
// with every Shp_ parameter sorted by name in byte order (Bitrix's handler
// ksorts them; Bitrix names them SHP_…, so the prefix is matched in any
// case), hex in either case. The merchant may switch the algorithm to
// SHA-256 or others in the Robokassa account: set signature.algorithm to
// match. The site answers OK<InvId> once it applied the payment; anything
// else is not a success. Retry window: Robokassa documents none here, so
// none is assumed.
var robokassa = preset{
	Keys:    []KeyPart{{Source: FromRequest, Name: "InvId"}},
	Methods: []string{"GET", "POST"},
	Signature: SignatureConfig{
		Scheme: SchemeDigest, Algorithm: "md5", Encoding: encHex,
		Message: &MessageConfig{
			Parts:  []string{"{request.OutSum}", "{request.InvId}", "{secret}"},
			Fields: &FieldsConfig{Source: string(FromRequest), IncludePrefix: "Shp_", IgnorePrefixCase: true, Format: "{k}={v}"},
			Join:   ":",
		},
		From: []keyPartFile{{Request: "SignatureValue"}},
	},
	Success: &Success{Body: mustTemplate("OK{request.InvId}")},
}

// yookassa: JSON notifications that carry no signature; YooKassa publishes
// the networks it sends from (its webhook documentation; the official PHP
// SDK's SecurityHelper lists the same IPv4 ranges and four /64s inside
// 2a02:5180::/32). One payment sends several events
// (payment.waiting_for_capture, payment.succeeded, payment.canceled), so
// the event is part of the key; refund.succeeded carries the refund's own
// object.id, so every partial refund is its own event. YooKassa resends a
// notification it got no 200 for over 24 hours, and counts exactly 200 as
// received ("any other response code is considered invalid"), so 201 or
// 204 is not a success: the claim is freed and YooKassa's retry runs.
var yookassa = preset{
	Keys: []KeyPart{{Source: FromBody, Name: "object.id"}, {Source: FromBody, Name: "event"}},
	Signature: SignatureConfig{
		Scheme: SchemeSourceAddress,
		Allow: []string{"185.71.76.0/27", "185.71.77.0/27", "77.75.153.0/25",
			"77.75.156.11", "77.75.156.35", "77.75.154.128/25", "2a02:5180::/32"},
	},
	RetryWindow: 24 * time.Hour,
	Success:     &Success{Statuses: mustStatuses("200")},
}

// tbank (T-Bank, formerly Tinkoff, internet acquiring): JSON notifications
// whose Token is SHA-256 of the values of the root's scalar fields plus
// Password, sorted by name and concatenated; nested objects and arrays are
// left out, booleans are "true"/"false". T-Bank sends lower-case hex and
// its SDKs compare exactly; the site answers OK.
//
// What T-Bank's API (its OpenAPI, /v2/Notification) notifies, and what
// tells the notifications apart:
//   - a payment's statuses (AUTHORIZED, CONFIRMED, REVERSED, REFUNDED,
//     REJECTED, …): PaymentId and Status;
//   - partial refunds and reversals: /v2/Cancel with an Amount moves a
//     payment to PARTIAL_REFUNDED (or PARTIAL_REVERSED) once per call, and
//     the notifications differ only in their Amount, so for those two
//     statuses the Amount is part of the key;
//   - receipts (NotificationFiscalization, Status RECEIPT): one per
//     fiscal document of the payment (the payment's, each refund's), told
//     apart by FiscalDocumentNumber, part of the key for RECEIPT;
//   - card (AttachCard) notifications carry a PaymentId; QR account
//     linking (NotificationQr, ACTIVE or INACTIVE) carries none, only its
//     RequestKey, which stands in for it.
//
// The conditional parts are left out when empty, so the key of every
// other notification is PaymentId:Status as before. T-Bank resends a
// notification not answered OK every hour for 24 hours (the
// notification section; its introduction adds "then once a day for a
// month", which ttl can cover where that matters).
var tbank = preset{
	Keys: []KeyPart{
		{Source: FromBody, Name: "PaymentId", Fallback: []string{"RequestKey"}},
		{Source: FromBody, Name: "Status"},
		{Source: FromBody, Name: "Amount", Optional: true,
			When: []Condition{cond(FromBody, "Status", "", "^PARTIAL_(REFUNDED|REVERSED)$", nil)}},
		{Source: FromBody, Name: "FiscalDocumentNumber", Optional: true,
			When: []Condition{cond(FromBody, "Status", "RECEIPT", "", nil)}},
	},
	Signature: SignatureConfig{
		Scheme: SchemeDigest, Algorithm: "sha256", Encoding: encHexLower,
		Message: &MessageConfig{Fields: &FieldsConfig{
			Source: string(FromBody), Exclude: []string{"Token"},
			Add: map[string]string{"Password": "{secret}"}, Format: "{v}",
		}},
		From: []keyPartFile{{Body: "Token"}},
	},
	RetryWindow: 24 * time.Hour,
	Success:     &Success{Body: mustTemplate("OK")},
}

// cloudpayments: the notifications the official Bitrix module
// (cloudpayments/CMS-Bitrix-CP, handler.php processRequest) handles, each
// on its own URL sale_ps_result.php?action=…: check (before the charge),
// pay (charged, or authorized in two stages), fail, confirm (a two-stage
// payment captured: marks it paid), refund and cancel (a hold voided).
// They are form-encoded by default, each with Content-HMAC: base64
// HMAC-SHA256 of the raw body under the API secret (X-Content-HMAC, its
// twin, is checked only when Content-HMAC is missing). The notification
// type is not in the body, so the merchant's notification URLs must carry
// action, and the key holds it; action is not covered by the HMAC. Every
// notification but refund names the payment's TransactionId; a refund's
// TransactionId is the refund's own (the module compares the payment's
// with PaymentTransactionId), so each partial refund is its own event.
// The site answers {"code":0} when it accepted the notification.
// Retry window: not in the documentation stored here, so none.
var cloudpayments = preset{
	Keys: []KeyPart{{Source: FromForm, Name: "TransactionId"}, {Source: FromQuery, Name: "action"}},
	Signature: SignatureConfig{
		Scheme: SchemeHMAC, Algorithm: "sha256", Encoding: encBase64,
		Message: &MessageConfig{Body: true},
		From:    []keyPartFile{{Header: "Content-HMAC"}, {Header: "X-Content-HMAC"}},
	},
	Success: &Success{JSON: []JSONWant{{Path: "code", Value: 0}}},
}

// rbs: callbacks of the RBS gateway that Sberbank, Alfa-Bank and others
// run, by GET or POST (the gateway's callback documentation: "POST and
// GET requests can be sent"; Bitrix's SberbankOnlineHandler reads them
// with $request->get()). checksum is upper-case hex HMAC-SHA256 of every
// parameter but checksum and sign_alias, sorted by name, as "name;value;"
// concatenated; it is compared in either case. An order sends one
// callback per operation (approved, deposited, reversed, refunded,
// declinedByTimeout, …) and outcome (status 1 or 0), so both are in the
// key. refunded comes once per partial refund of one mdOrder, and a
// partial reversal likewise: for those two operations the key names the
// refund by the callback's optional parameters: externalRefundId
// (the refund's id in the merchant's request), else refundedAmount (the
// order's refunded total so far, which grows with every refund), else
// operationRefundedAmount (this refund's amount). The callback's amount is
// the order's registered amount, the same on every callback of one order,
// so it names nothing. A refund or reversal callback with none of the
// three (the gateway's basic parameters) cannot be told from another
// refund of the same order: it goes to the site without dedupe (serialize
// by mdOrder keeps two from running at once). Other callbacks keep
// mdOrder:operation:status. The gateway counts only 200 OK as delivered
// and retries every 30 seconds until 3 attempts failed (per merchant,
// adjustable by the bank). Source: the gateway maker's callback
// documentation, dev.bpcbt.com/en/integration/api/rest.html ("Callback
// notifications": amount is the "Registered order amount";
// externalRefundId the "External identifier of the refund operation").
var rbsRefund = cond(FromRequest, "operation", "", "^(refunded|reversed)$", nil)

var rbs = preset{
	Keys: []KeyPart{
		{Source: FromRequest, Name: "mdOrder"}, {Source: FromRequest, Name: "operation"}, {Source: FromRequest, Name: "status"},
		{Source: FromRequest, Name: "externalRefundId", Fallback: []string{"refundedAmount", "operationRefundedAmount"},
			Labelled: true, When: []Condition{rbsRefund}},
	},
	NoDedupe: []NoDedupeShape{{When: []Condition{rbsRefund}, IfKeyMissing: true,
		Reason: "rbs refund or reversal callback without externalRefundId, refundedAmount or operationRefundedAmount: no key tells two refunds of one order apart"}},
	Methods: []string{"GET", "POST"},
	Signature: SignatureConfig{
		Scheme: SchemeHMAC, Algorithm: "sha256", Encoding: encHex,
		Message: &MessageConfig{Fields: &FieldsConfig{
			Source: string(FromRequest), Exclude: []string{"checksum", "sign_alias"}, Format: "{k};{v};",
		}},
		From: []keyPartFile{{Request: "checksum"}},
	},
	RetryWindow: 90 * time.Second,
	// "If a response other than 200 OK is returned to the payment
	// gateway, the notification is considered unsuccessful."
	Success: &Success{Statuses: mustStatuses("200")},
}

// bitrix24: events a Bitrix24 portal posts to an application's (or an
// outbound webhook's) handler, form-encoded, with the application token
// in auth[application_token]. One event is the event name, the entity's
// ID and the event's ts (Unix seconds): without ts every later change of
// the same deal would be a duplicate; with it, two changes of one entity
// in the same second would be one execution, and each delivery carries
// fresh auth (access_token, refresh_token), so no field of an event names
// it alone. No event carries an id of its own: every event goes to the
// site without dedupe (the token is still checked; serialize by
// data[FIELDS][ID] keeps two changes of one deal from running at once).
// The application's own lifecycle events (ONAPPINSTALL, …) and
// ONOFFLINEEVENT carry no entity at all. Bitrix24 does not resend a
// failed event, so there is no retry window.
var bitrix24 = preset{
	Signature: SignatureConfig{
		Scheme: SchemeToken,
		From:   []keyPartFile{{Form: "auth[application_token]"}},
	},
	NoDedupe: []NoDedupeShape{
		{When: []Condition{cond(FromForm, "event", "", "^(?i:ONAPPINSTALL|ONAPPUNINSTALL|ONAPPUPDATE|ONAPPPAYMENT|ONAPPTEST|ONOFFLINEEVENT)$", nil)},
			Reason: "bitrix24 application event (no entity id)"},
		{Reason: "bitrix24 events carry no unique id (ts has one-second resolution)"},
	},
}

func mustTemplate(text string) *Template {
	t, err := ParseTemplate(text)
	if err != nil {
		panic(err)
	}
	return t
}

func mustStatuses(s string) *StatusSet {
	set, err := ParseStatusSet(s)
	if err != nil {
		panic(err)
	}
	return &set
}
