package contract

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
// id (the payment's unique number), sum, clientid, orderid and key, the
// MD5 of id, sum, clientid and orderid concatenated with the secret word
// appended (clientid and orderid may be empty, and are then empty in the
// message too). One notification per payment, so id alone names it. The
// shop answers "OK " followed by md5(id + secret word); PayKeeper repeats
// the notification until it gets that answer, so anything else frees the
// claim. Retry window: not documented, so none.
var paykeeper = preset{
	Keys: []KeyPart{{Source: FromForm, Name: "id"}},
	Signature: SignatureConfig{
		Scheme: SchemeDigest, Algorithm: "md5", Encoding: encHexLower,
		Message: &MessageConfig{
			Parts: []string{"{form.id}", "{form.sum}", "{form.clientid}", "{form.orderid}", "{secret}"},
		},
		From: []keyPartFile{{Form: "key"}},
	},
	Success: &Success{Body: mustTemplate("OK {md5:{form.id}{secret}}")},
}

// cdek: CDEK API v2 webhooks (api-docs.cdek.ru, "Webhooks"), JSON with
// type, date_time, uuid and attributes. uuid is the entity's (for
// ORDER_STATUS the order's), not the event's: every status of one order
// carries the same uuid. An order status event is the order, its status
// code and the time the status was set, so those are in the key; for the
// other types (PRINT_FORM, DOWNLOAD_PHOTO, PREALERT_CLOSED, …) the uuid
// names the form, the photo set or the prealert itself, which is ready or
// closed once, and the two status parts are left out. CDEK's webhook
// documentation names no signature and no addresses it sends from, so the
// preset checks a secret token the shop adds to the URL it registers
// (https://shop.example/cdek-hook.php?token=…), compared in constant
// time. CDEK does not resend: "In case of failed connection, the system
// will not try to send the message again", so there is no retry window.
var cdek = preset{
	Keys: []KeyPart{
		{Source: FromBody, Name: "type"}, {Source: FromBody, Name: "uuid"},
		{Source: FromBody, Name: "attributes.status_code",
			When: []Condition{cond(FromBody, "type", "ORDER_STATUS", "", nil)}},
		{Source: FromBody, Name: "attributes.status_date_time",
			When: []Condition{cond(FromBody, "type", "ORDER_STATUS", "", nil)}},
	},
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
var woocommerce = preset{
	NoDedupe: []NoDedupeShape{{Reason: "woocommerce: no header names one notification"}},
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
