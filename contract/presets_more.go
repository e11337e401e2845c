package contract

import "regexp"

// More senders a 1C-Bitrix (or WooCommerce) shop receives besides its
// payment systems: a Telegram bot, PayKeeper payments, CDEK delivery
// statuses, amoCRM's webhooks, and WooCommerce's own webhooks. Each is registered in the
// presets map (presets.go); docs/senders.md ("More senders a shop
// receives") cites the provider's sentence behind every choice here.

// telegram: Bot API webhook updates, one JSON Update per POST. update_id
// is "the update's unique identifier" (Bot API, Update), and a failed
// delivery is repeated with the same update ("In case of an unsuccessful
// request, we will give up after a reasonable amount of attempts",
// setWebhook). Telegram signs nothing: setWebhook's secret_token comes
// back as it is in X-Telegram-Bot-Api-Secret-Token, compared as a token
// (in constant time). A repeat is answered 200 with an empty body by
// default (see presetDuplicateStatus): a bot may answer an update with a
// Bot API call in the body ("perform a request to the Bot API while
// sending an answer to the webhook"), and replaying that answer would
// make Telegram run the call again (send the message twice). Telegram
// documents no retry window, so none is assumed. Telegram repeats a
// request answered with any status but a 2xx (setWebhook: "a request
// with response HTTP status code different from 2XY"), so only a 2xx is
// stored: a stored 404 would answer Telegram's repeat with the empty 200
// above, and the update would be lost.
var telegram = preset{
	Keys:          []KeyPart{{Source: FromBody, Name: "update_id"}},
	FinalStatuses: "2xx",
	Signature: SignatureConfig{
		Scheme: SchemeToken,
		From:   []keyPartFile{{Header: "X-Telegram-Bot-Api-Secret-Token"}},
	},
}

// paykeeper: the POST notification PayKeeper sends for every accepted
// payment (docs.paykeeper.ru, "Приём POST-оповещений"), form-encoded:
// id (the payment's unique number) and sum, always; clientid and orderid,
// documented as not required; and key, the MD5 of parameters 1 to 4 (id,
// sum, clientid, orderid) concatenated with the secret word appended.
// How each is written into that MD5 is what PayKeeper's own Bitrix module
// (paykeeper/bitrix17, result_rec.php) checks: sum through PHP's
// number_format with two decimals and no thousands separator, whatever the form
// carries ("100" and "100.00" both sign as 100.00), and an absent
// clientid as nothing (PHP concatenates the missing $_POST value as an
// empty string); an absent orderid is signed as empty too, as PayKeeper
// concatenates the parameters it sent. One notification per payment, so
// id alone names it. The shop answers "OK " followed by md5(id + secret
// word); PayKeeper repeats the notification until it gets that answer,
// so anything else frees the claim. Retry window: not documented, so
// none.
var paykeeper = preset{
	Keys: []KeyPart{{Source: FromForm, Name: "id"}},
	Signature: SignatureConfig{
		Scheme: SchemeDigest, Algorithm: "md5", Encoding: encHexLower,
		Message: &MessageConfig{
			Parts: []string{"{form.id}", "{decimal2:form.sum}", "{optional:form.clientid}", "{optional:form.orderid}", "{secret}"},
		},
		From: []keyPartFile{{Form: "key"}},
	},
	Success: &Success{Body: mustTemplate("OK {md5:{form.id}{secret}}")},
}

// cdek: CDEK API v2 webhooks (api-docs.cdek.ru, "Webhooks"), JSON with
// type, date_time, uuid and attributes. The page documents four types
// (ORDER_STATUS, PRINT_FORM, DOWNLOAD_PHOTO, PREALERT_CLOSED); CDEK adds
// more over time, so the key is built for any type from what every
// webhook carries: type; uuid, the entity's identifier (for ORDER_STATUS
// the order's, so every status of one order shares it; for the others
// the form's, the photo set's, the prealert's, and for a type not listed
// whatever entity it is about); and date_time, "the date and time of the
// event" (for ORDER_STATUS when the status was set). An order status
// event adds its status code and the time the status was set, so two
// statuses of one order set in the same second stay two. date_time is
// mandatory; a webhook without it is keyed without it. Two events of one
// type, entity and second that still differ are each their own event
// (changed_payload new_event: claimed under the key and the payload's
// hash), never a 422: CDEK does not resend ("In case of failed
// connection, the system will not try to send the message again"), so a
// refused event would be lost, and there is no retry window. CDEK's
// webhook documentation names no signature and no addresses it sends
// from, so the preset checks a secret token the shop adds to the URL it
// registers (https://shop.example/cdek-hook.php?token=…), compared in
// constant time.
var cdekStatus = cond(FromBody, "type", "ORDER_STATUS", "", nil)

var cdek = preset{
	Keys: []KeyPart{
		{Source: FromBody, Name: "type"}, {Source: FromBody, Name: "uuid"},
		{Source: FromBody, Name: "date_time", Optional: true},
		{Source: FromBody, Name: "attributes.status_code", When: []Condition{cdekStatus}},
		{Source: FromBody, Name: "attributes.status_date_time", When: []Condition{cdekStatus}},
	},
	ChangedPayload: ChangedNewEvent,
	Signature: SignatureConfig{
		Scheme: SchemeToken,
		From:   []keyPartFile{{Query: "token"}},
	},
}

// amocrm: webhooks of an amoCRM account (Settings, Integrations,
// Webhooks; or its API's /api/v4/webhooks), posted form-encoded ("The
// WebHook is sent in x-www-form-urlencoded format", amoCRM's developer
// documentation, "Webhooks"): the changed entities as
// {entity}[{action}][0][fields…], e.g. leads[status][0][id], with
// account[subdomain]. Nothing in it names one notification: the entity's
// id and time repeat across two changes of one deal, and amoCRM signs
// nothing. So the preset checks a secret token the shop adds to the URL
// it registers (…/amocrm-hook.php?token=…, compared in constant time) and
// forwards every delivery without dedupe; the operator adds serialize by
// the entity the handler changes (leads[status][0][id], …), so two
// deliveries about one deal never run at the site at the same time.
// Retry window: amoCRM documents none here, so none.
var amocrm = preset{
	NoDedupe: []NoDedupeShape{{Reason: "amocrm: no field names one notification"}},
	Signature: SignatureConfig{
		Scheme: SchemeToken,
		From:   []keyPartFile{{Query: "token"}},
	},
}

// woocommerce: webhooks a WooCommerce store sends (order.created,
// order.updated, product.*, customer.*, coupon.*, action.*), signed in
// X-WC-Webhook-Signature: base64 HMAC-SHA256 of the raw JSON body under
// the webhook's secret (WC_Webhook::generate_signature). No header or
// field names one notification: X-WC-Webhook-ID is the webhook (the
// subscription), Topic/Resource/Event its settings, and
// X-WC-Webhook-Delivery-ID is wp_hash(webhook id . current second)
// (WC_Webhook::get_new_delivery_id), so two notifications of one webhook
// in the same second share it. WooCommerce does not resend a failed
// delivery either (failed_delivery only counts failures and disables the
// webhook after five). So the preset checks the signature and forwards
// every delivery to the site without dedupe; a site that adds its own
// event id (a plugin's header) names it with key.
//
// When a webhook is saved, WooCommerce first posts a test ping
// (WC_Webhook::deliver_ping): the body "webhook_id=<id>", its own
// user agent and none of the X-WC-Webhook-* headers, so no signature;
// anything but 200 shows as an error in the shop's admin. hookonce
// answers exactly that shape (a POST whose whole body is webhook_id=
// and digits, without X-WC-Webhook-Signature) with 200 itself and
// forwards nothing: the site never needed the ping, and nothing unsigned
// reaches it.
var woocommerce = preset{
	NoDedupe: []NoDedupeShape{{Reason: "woocommerce: no header names one notification"}},
	Pings: []PingShape{{Body: regexp.MustCompile(`\Awebhook_id=[0-9]{1,20}\z`), Without: []string{"X-Wc-Webhook-Signature"},
		Reason: "woocommerce ping sent when a webhook is saved (deliver_ping): answered 200 by hookonce, not forwarded"}},
	Signature: SignatureConfig{
		Scheme: SchemeHMAC, Algorithm: "sha256", Encoding: encBase64,
		Message: &MessageConfig{Body: true},
		From:    []keyPartFile{{Header: "X-WC-Webhook-Signature"}},
	},
}

// presetDuplicateStatus is the status a preset answers an exact repeat
// with, instead of replaying the stored answer (0: replay). The sender's
// own duplicate setting wins.
func presetDuplicateStatus(name string) int {
	if name == "telegram" {
		return 200
	}
	return 0
}
