package contract

import "time"

// Presets for international payment providers a shop may take besides its
// Russian ones (Paddle Billing, Mollie, PayPal), and Yandex Pay. Each is
// registered in the presets map (presets.go); docs/senders.md
// ("International payment providers, and Yandex Pay") cites the
// provider's page behind every choice here.

// paddle: Paddle Billing webhooks, JSON {event_id, notification_id,
// event_type, occurred_at, data}, signed in Paddle-Signature (ts and h1,
// HMAC-SHA256 of "ts:body" under the destination's secret key). One
// event fans out to one notification per notification destination
// subscribed to it; the notifications share event_id and each has its
// own notification_id (Paddle API reference, "Notifications"). Keying on
// event_id, as Paddle's own handler advice does, would answer a second
// destination on the same URL from the first one's stored answer (or
// refuse it when the destinations render other API versions); the
// notification is what Paddle retries, so notification_id names one
// delivery and its retries. A delivery without one (not a webhook Paddle
// documents) is keyed by its event_id: the prefixes (ntf_, evt_) keep the
// two apart.
//
// Paddle counts a delivery as received only on a 2xx within five seconds
// and retries anything else, up to 60 times over three days for live
// accounts ("Handle webhook delivery"), so only a 2xx is stored: a 404
// from a deploy or a 403 from a firewall is handed back and frees the
// claim, and Paddle's retry reaches the site.
//
// Tolerance: Paddle's Node SDK refuses a ts more than five seconds old,
// judged by the receiver's clock. hookonce keeps its 5m default: a
// five-second window fails on ordinary clock skew between Paddle, the
// proxy and NTP, and a captured delivery sent again inside the window is
// answered from the store (its notification_id is already claimed), so
// it cannot run the handler twice. signature.tolerance narrows it.
var paddle = preset{
	Keys:          []KeyPart{{Source: FromBody, Name: "notification_id", Fallback: []string{"event_id"}}},
	Signature:     SignatureConfig{Scheme: SchemePaddle},
	RetryWindow:   72 * time.Hour,
	FinalStatuses: "2xx",
}

// mollie: the classic webhooks of Mollie's Payments API (a webhookUrl
// set on a payment, order or subscription). Mollie posts a form with one
// field, id (tr_…, ord_…), and nothing else: no status and no signature;
// the handler fetches the object from Mollie's API and acts on its
// current status (docs.mollie.com, "Webhooks": a fake call can never
// make an order paid, since the status is never taken from the call).
// Every status change of one payment posts the same id, so no key can
// tell "open" from "paid": keying on id would answer the paid
// notification from the open one's stored answer. Every delivery is
// forwarded without dedupe, serialized by id (presetSerialize), so two
// status changes of one payment never run at the site together and the
// second one's fetch sees what the first one wrote. Nothing is signed,
// so the preset checks nothing; an operator whose module lets it add a
// token to the webhookUrl adds signature: {scheme: token, …}.
var mollie = preset{
	NoDedupe: []NoDedupeShape{{Reason: "mollie: the same id is posted for every status change of a payment"}},
}

// presetSerialize is the serialize key a preset sets when the file sets
// none (nil: none): the object its notifications are about.
func presetSerialize(name string) []KeyPart {
	if name == "mollie" {
		return []KeyPart{{Source: FromForm, Name: "id"}}
	}
	return nil
}

// paypal: PayPal REST webhooks, a JSON event {id: "WH-…", event_type,
// resource_type, resource, …} (developer.paypal.com, "Integrate
// webhooks"), signed with SHA256withRSA by PayPal's certificate
// (scheme_paypal.go: the operator pins it in cert_file and names the
// listener's webhook_id). The event's id names it: PayPal resends the
// same event to the listener until it answers 2xx, up to 25 times over
// three days (same page), so only a 2xx is stored and the key is the
// event id. Each listener has its own webhook id inside the signature, so
// a delivery meant for another listener fails the check rather than
// sharing this one's records.
var paypal = preset{
	Keys:          []KeyPart{{Source: FromBody, Name: "id"}},
	Signature:     SignatureConfig{Scheme: SchemePayPal},
	RetryWindow:   72 * time.Hour,
	FinalStatuses: "2xx",
}

// yandexpay: Yandex Pay (and Split) notifications to the shop's
// /v1/webhook, application/octet-stream whose body is a JWT signed ES256
// (pay.yandex.ru, Merchant API, "/v1/webhook"): its payload is {event,
// eventTime, merchantId, order: {orderId, paymentStatus}, operation:
// {operationId, externalOperationId, operationType, status}}; the
// header carries kid, iat and exp (Merchant API, "Authenticating Yandex
// Pay request"). No field names one notification, so the key is what
// changed: the event, the order (else, for a notification about an
// operation alone, the operation), the order's payment status, the
// operation and its status; the parts a notification lacks are empty.
// Each delivery is a token signed anew, so the bytes of a retry differ:
// the hash is the payload's (hash mode jwt). A payload that differs under
// one key is a change the key does not name (a delivery status of the
// order, say): it is a notification of its own (new_event), claimed under
// the key and its payload's hash, so it runs and its own retries replay.
// The keys are Yandex's JWKS, pinned in jwks_file. Yandex documents no
// retry policy or answer here: only a 2xx is stored, which costs nothing
// if it never retries and lets its retry through if it does.
var yandexpay = preset{
	Keys: []KeyPart{
		{Source: FromJWT, Name: "event"},
		{Source: FromJWT, Name: "order.orderId", Fallback: []string{"operation.operationId"}, Labelled: true},
		{Source: FromJWT, Name: "order.paymentStatus", Optional: true},
		{Source: FromJWT, Name: "operation.operationId", Optional: true},
		{Source: FromJWT, Name: "operation.status", Optional: true},
	},
	Signature:      SignatureConfig{Scheme: SchemeJWTES256},
	Hash:           HashJWT,
	ChangedPayload: ChangedNewEvent,
	FinalStatuses:  "2xx",
}
