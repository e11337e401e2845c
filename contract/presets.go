package contract

import "time"

// preset is what naming a well-known sender fills in: where its event id
// lives, how it signs, and how long it keeps retrying. It adds no match
// condition, and every field the sender sets itself wins.
type preset struct {
	Keys        []KeyPart
	Signature   SignatureConfig
	RetryWindow time.Duration
	Success     *Success // nil: every final status is a success
}

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
var presets = map[string]preset{
	"stripe": {
		Keys:        []KeyPart{{Source: FromBody, Name: "id"}},
		Signature:   SignatureConfig{Scheme: SchemeStripe},
		RetryWindow: 72 * time.Hour,
	},
	"github": {
		Keys:        []KeyPart{{Source: FromHeader, Name: "X-Github-Delivery"}},
		Signature:   SignatureConfig{Scheme: SchemeGitHub},
		RetryWindow: 72 * time.Hour,
	},
	"shopify": {
		Keys:        []KeyPart{{Source: FromHeader, Name: "X-Shopify-Event-Id", Fallback: "X-Shopify-Webhook-Id"}},
		Signature:   SignatureConfig{Scheme: SchemeShopify},
		RetryWindow: 4 * time.Hour,
	},
	"standard-webhooks": {
		Keys:        []KeyPart{{Source: FromHeader, Name: "Webhook-Id"}},
		Signature:   SignatureConfig{Scheme: SchemeStandardWebhooks},
		RetryWindow: 75 * time.Hour,
	},
	"slack": {
		Keys:        []KeyPart{{Source: FromBody, Name: "event_id"}},
		Signature:   SignatureConfig{Scheme: SchemeSlack},
		RetryWindow: 10 * time.Minute,
	},
	// The generic scheme as a preset: the sender names the header (and
	// encoding, prefix) and its own key.
	"hmac-sha256": {
		Signature: SignatureConfig{Scheme: SchemeHMACSHA256},
	},
}
