package contract

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// stripe: Stripe-Signature: t=1614265330,v1=<hex>[,v1=<hex>…][,v0=…]
// over "<t>.<body>". Other schemes in the header (v0 is test mode) are
// ignored, as Stripe's libraries do.
func (v *hmacVerifier) stripe(h http.Header, body []byte, now time.Time) error {
	val, err := v.value(h, v.header)
	if err != nil {
		return err
	}
	var ts string
	var sigs [][]byte
	for item := range strings.SplitSeq(val, ",") {
		k, x, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return sigErr("malformed %s header", v.header)
		}
		switch k {
		case "t":
			if ts != "" {
				return sigErr("malformed %s header: two timestamps", v.header)
			}
			ts = x
		case "v1":
			if b, ok := decodeHex(x); ok && len(sigs) < maxSignatures {
				sigs = append(sigs, b)
			}
		}
	}
	if ts == "" {
		return sigErr("malformed %s header: no timestamp", v.header)
	}
	if len(sigs) == 0 {
		return sigErr("malformed %s header: no v1 signature", v.header)
	}
	t, err := v.checkTime("timestamp in "+v.header, ts, now)
	if err != nil {
		return err
	}
	return v.match(sigs, []byte(strconv.FormatInt(t, 10)), []byte("."), body)
}
