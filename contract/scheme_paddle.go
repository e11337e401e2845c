package contract

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// paddle: Paddle-Signature: ts=<Unix seconds>;h1=<hex>[;h1=<hex>…] over
// "<ts>:<body>" (Paddle Billing, "Verify webhook signatures"). Several
// h1 are accepted, as Stripe's several v1 are, so a destination's secret
// can be rotated while deliveries signed with either are in flight; other
// keys in the header are ignored.
func (v *hmacVerifier) paddle(h http.Header, body []byte, now time.Time) error {
	val, err := v.value(h, v.header)
	if err != nil {
		return err
	}
	var ts string
	var sigs [][]byte
	for item := range strings.SplitSeq(val, ";") {
		k, x, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return sigErr("malformed %s header", v.header)
		}
		switch k {
		case "ts":
			if ts != "" {
				return sigErr("malformed %s header: two timestamps", v.header)
			}
			ts = x
		case "h1":
			if b, ok := decodeHex(x); ok && len(sigs) < maxSignatures {
				sigs = append(sigs, b)
			}
		}
	}
	if ts == "" {
		return sigErr("malformed %s header: no ts", v.header)
	}
	if len(sigs) == 0 {
		return sigErr("malformed %s header: no h1 signature", v.header)
	}
	t, err := v.checkTime("ts in "+v.header, ts, now)
	if err != nil {
		return err
	}
	return v.match(sigs, []byte(strconv.FormatInt(t, 10)), []byte(":"), body)
}
