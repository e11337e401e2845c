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
	// FinalStatuses are the answers stored and replayed ("": the file's
	// final_statuses, else the built-in 2xx,4xx). A provider
	// that retries every answer but a 2xx does not take a 404 or a 403
	// as delivered: its preset says "2xx", so any other answer is handed
	// back, the claim is freed and the provider's retry reaches the site.
	// It beats the file's defaults (as RetryWindow does); the sender's
	// own final_statuses beats it.
	FinalStatuses string
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
	// Pings are the provider's unsigned test requests, answered 200 by
	// hookonce itself and never forwarded (see PingShape).
	Pings []PingShape
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
//
// Which answers are stored: Stripe, Shopify, Slack, Standard Webhooks and
// Telegram resend a delivery answered with anything but a 2xx, and a
// GitHub delivery answered so is a failed delivery, the one an operator
// or a script redelivers; none of them takes a 404 or a 403 as
// delivered. Their presets store only a 2xx (FinalStatuses "2xx"): a
// deploy's 404 or a firewall's 403 is handed back, the claim is freed,
// and the retry or redelivery reaches the site once it is fixed. An
// operator who wants a 4xx stored names it in the sender's
// final_statuses.
var presets = map[string]preset{
	// Stripe: the Event object's id is unique per event (API reference,
	// "The Event object": id, "Unique identifier for the object"), and
	// its retries resend that event. One event reaches one URL twice
	// during Stripe's documented API-version upgrade ("Handle webhook
	// versioning": a second endpoint on the same URL, with the new
	// api_version; a webhook endpoint's api_version is the version
	// "events are rendered as for this webhook endpoint"): the same id,
	// rendered in another api_version, signed with the second endpoint's
	// own secret. Both copies are for the site (it processes one and
	// acknowledges the other, by the version), so api_version is part of
	// the key: each copy runs once and the retries of each are replayed.
	// Events before late 2014 carry a null api_version, so it is
	// optional. pending_webhooks, "Number of webhooks that haven't been
	// successfully delivered", is rendered anew for every delivery, so a
	// retry after another endpoint succeeded differs in it: the payload
	// hash leaves it out.
	"stripe": {
		Keys:          []KeyPart{{Source: FromBody, Name: "id"}, {Source: FromBody, Name: "api_version", Optional: true}},
		Signature:     SignatureConfig{Scheme: SchemeStripe},
		RetryWindow:   72 * time.Hour,
		FinalStatuses: "2xx",
		Hash:          HashJSON,
		Ignore:        []string{"pending_webhooks"},
	},
	// GitHub: X-GitHub-Delivery is the event's id, "shared with all
	// deliveries for all webhooks that subscribe to this event" (REST
	// API, hook delivery guid); X-GitHub-Hook-ID names the webhook the
	// delivery is for. One event to two hooks on one URL is two
	// deliveries; a redelivery keeps both. GitHub does not redeliver by
	// itself: a delivery answered with anything but a 2xx is recorded as
	// failed, and the operator (or a script) redelivers it; a stored 404
	// would answer that redelivery, so only a 2xx is stored.
	"github": {
		// The hook id is read when present (GitHub sends it on every
		// delivery); a delivery without it (a hand-made test, a tool) is
		// keyed by its delivery id alone, as before the hook id counted,
		// which no delivery that has one shares.
		Keys:          []KeyPart{{Source: FromHeader, Name: "X-Github-Hook-Id", Optional: true}, {Source: FromHeader, Name: "X-Github-Delivery"}},
		Signature:     SignatureConfig{Scheme: SchemeGitHub},
		RetryWindow:   72 * time.Hour,
		FinalStatuses: "2xx",
	},
	// Shopify: the delivery-structure page's headers table says what
	// each id is: X-Shopify-Event-Id is shared by every delivery one
	// merchant action produces (orders/create, orders/paid and
	// orders/updated of one checkout carry the same one), and
	// X-Shopify-Webhook-Id is one per delivery (so each subscription's
	// copy has its own). The key is the topic with the event id: each
	// topic of one action is its own event and runs; a retry repeats
	// both and is replayed; two subscriptions to one topic get one
	// delivery each with the same event id, which Shopify's "Ignore
	// duplicate webhooks" page calls duplicates ("the same value across
	// more than one webhook indicates a duplicate", and one webhook per
	// subscription for the same event): one run. Keying on the
	// Webhook-Id would run the handler once per subscription; on the
	// Event-Id alone, only the action's first topic would run. Without
	// an Event-Id (older API versions) the Webhook-Id stands in. The
	// copies of one topic for two subscriptions may differ
	// (include_fields, API version), so a changed payload under one key
	// is a duplicate and gets the first's answer.
	"shopify": {
		Keys: []KeyPart{
			{Source: FromHeader, Name: "X-Shopify-Topic"},
			{Source: FromHeader, Name: "X-Shopify-Event-Id", Fallback: []string{"X-Shopify-Webhook-Id"}},
		},
		Signature:      SignatureConfig{Scheme: SchemeShopify},
		RetryWindow:    4 * time.Hour,
		FinalStatuses:  "2xx",
		ChangedPayload: ChangedDuplicate,
	},
	// Standard Webhooks: webhook-id is "unique across all messages, but
	// the same when the same webhook is being resent"; a delivery "is
	// considered successful if it was responded to with a 2xx status
	// code", any other status (the specification names 404 and 500) is a
	// failure the sender retries.
	"standard-webhooks": {
		Keys:          []KeyPart{{Source: FromHeader, Name: "Webhook-Id"}},
		Signature:     SignatureConfig{Scheme: SchemeStandardWebhooks},
		RetryWindow:   75 * time.Hour,
		FinalStatuses: "2xx",
	},
	// Slack: Events API callbacks carry event_id. The URL verification
	// handshake (type url_verification, answered with its challenge) and
	// app_rate_limited carry none; interactivity payloads (a form with
	// payload=<JSON>) and slash commands (a form with command=/…) are
	// signed the same way and carry none either, and Slack does not retry
	// them. Those shapes go to the site undeduplicated (api.slack.com:
	// "url_verification event", "Rate limiting: app_rate_limited",
	// "Handling user interaction", "Slash commands"). Slack retries an
	// event answered with anything but a 2xx.
	"slack": {
		Keys:          []KeyPart{{Source: FromBody, Name: "event_id"}},
		Signature:     SignatureConfig{Scheme: SchemeSlack},
		RetryWindow:   10 * time.Minute,
		FinalStatuses: "2xx",
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
//     payment to PARTIAL_REFUNDED (or PARTIAL_REVERSED) once per call. The
//     notification names neither the call nor the refund: its Amount is
//     described only as "the amount in kopecks" (not whether it is this
//     refund's amount or what is left), and /v2/Cancel's
//     ExternalRequestId is not among the notification's fields. Two equal
//     partial refunds may therefore send notifications byte for byte
//     alike, so those two statuses go to the site without dedupe
//     (serialize by PaymentId keeps two from running at once). REFUNDED
//     and REVERSED are the payment's final state after a cancel for the
//     whole (remaining) amount, once per payment, and stay keyed;
//   - receipts (NotificationFiscalization, Status RECEIPT): one per
//     fiscal document of the payment (the payment's, each refund's), told
//     apart by FiscalDocumentNumber, part of the key for RECEIPT;
//   - card (AttachCard) notifications carry a PaymentId; QR account
//     linking (NotificationQr, ACTIVE or INACTIVE) carries none, only its
//     RequestKey, which stands in for it.
//
// The conditional part is left out when empty, so the key of every
// other notification is PaymentId:Status. T-Bank resends a
// notification not answered OK every hour for 24 hours (the
// notification section; its introduction adds "then once a day for a
// month", which ttl can cover where that matters).
var tbank = preset{
	Keys: []KeyPart{
		{Source: FromBody, Name: "PaymentId", Fallback: []string{"RequestKey"}},
		{Source: FromBody, Name: "Status"},
		{Source: FromBody, Name: "FiscalDocumentNumber", Optional: true,
			When: []Condition{cond(FromBody, "Status", "RECEIPT", "", nil)}},
	},
	NoDedupe: []NoDedupeShape{{When: []Condition{cond(FromBody, "Status", "", "^PARTIAL_(REFUNDED|REVERSED)$", nil)},
		Reason: "tbank partial refund or reversal: the notification names neither the refund nor the call, two equal ones are alike"}},
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
// concatenated; it is compared in either case. The gateway counts only
// 200 OK as delivered and retries every 30 seconds until 3 attempts
// failed (per merchant, adjustable by the bank).
//
// What tells the callbacks apart (source: the gateway maker's REST
// documentation, dev.bpcbt.com/en/integration/api/rest.html, "Callback
// notifications" and "Order management"):
//   - an order's callbacks (approved, deposited, reversed, refunded,
//     declinedByTimeout, declinedCardPresent): mdOrder, the order in the
//     gateway, operation, the event, and status, its outcome (1 or 0).
//     amount is the order's "registered" amount, the same on every
//     callback of one order, so it names nothing. A payment "can be
//     reversed only once" (reverse.do), so reversed needs nothing more.
//   - refunded comes once per refund, and an order may be refunded "more
//     than once" (refund.do). The only parameter documented as naming one
//     refund is externalRefundId, "the identifier of the refund", which
//     the gateway itself checks so one id is one refund (refund.do); it is
//     an additional parameter the bank must switch on. refundedAmount and
//     operationRefundedAmount are both documented as the refund's
//     *amount*, not a growing total, so two equal partial refunds share
//     them: a refund callback without externalRefundId goes to the site
//     without dedupe (serialize by mdOrder keeps two from running at
//     once), never answered from another refund's record.
//   - card binding callbacks (bindingCreated, bindingActivityChanged)
//     carry no mdOrder and no status; bindingId, the stored credential's
//     id, is an additional parameter. A credential is created once, so
//     bindingCreated is keyed by bindingId and operation.
//     bindingActivityChanged reports the credential's enabled flag, which
//     may be switched off, on and off again: two of those callbacks can be
//     byte for byte alike, so every one goes to the site without dedupe
//     (setting the flag again is what the site does anyway). A
//     bindingCreated without bindingId is forwarded likewise.
var rbsRefund = cond(FromRequest, "operation", "refunded", "", nil)

var rbsBinding = cond(FromRequest, "operation", "", "^binding(Created|ActivityChanged)$", nil)

var rbs = preset{
	Keys: []KeyPart{
		// mdOrder on an order's callbacks; a binding callback has none,
		// and its credential's id stands in (operation keeps the two apart).
		{Source: FromRequest, Name: "mdOrder", Fallback: []string{"bindingId"}},
		{Source: FromRequest, Name: "operation"},
		// status is required of every callback about an order (one with
		// mdOrder); binding callbacks carry none.
		{Source: FromRequest, Name: "status", When: []Condition{cond(FromRequest, "mdOrder", "", "", yes)}},
		{Source: FromRequest, Name: "externalRefundId", Labelled: true, When: []Condition{rbsRefund}},
	},
	NoDedupe: []NoDedupeShape{
		{When: []Condition{rbsRefund}, IfKeyMissing: true,
			Reason: "rbs refund callback without externalRefundId: the gateway documents no other parameter that names one refund"},
		{When: []Condition{cond(FromRequest, "operation", "bindingActivityChanged", "", nil)},
			Reason: "rbs bindingActivityChanged: a credential switched off, on and off again sends alike callbacks"},
		{When: []Condition{rbsBinding}, IfKeyMissing: true,
			Reason: "rbs binding callback without bindingId"},
	},
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
