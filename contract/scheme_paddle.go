package contract

import (
	"net/http"
	"time"
)

// paddle: Paddle-Signature: ts=<Unix seconds>;h1=<hex>[;h1=<hex>…] over
// "<ts>:<body>" (Paddle Billing, "Verify webhook signatures"). Several
// h1 are accepted, as Stripe's several v1 are, so a destination's secret
// can be rotated while deliveries signed with either are in flight; other
// keys in the header are ignored.
func (v *hmacVerifier) paddle(h http.Header, body []byte, now time.Time) error {
	return v.timestamped(h, body, now, timestampedHeader{sep: ";", ts: "ts", tsWord: "ts", sig: "h1", join: ":"})
}
