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
	return v.timestamped(h, body, now, timestampedHeader{sep: ",", ts: "t", tsWord: "timestamp", sig: "v1", join: "."})
}

// timestampedHeader is the shape of a header that carries a timestamp and
// one or more hex HMACs of "<timestamp><join><body>" as key=value items
// (Stripe's, Paddle's).
type timestampedHeader struct {
	sep    string // between items
	ts     string // the timestamp's key
	tsWord string // the timestamp as refusals name it
	sig    string // the key of each signature
	join   string // between the timestamp and the body in the signed message
}

// timestamped checks a timestampedHeader: every signature item is tried
// (up to maxSignatures, so a secret can be rotated while deliveries
// signed with either are in flight), other keys are ignored, two
// timestamps are refused.
func (v *hmacVerifier) timestamped(h http.Header, body []byte, now time.Time, f timestampedHeader) error {
	val, err := v.value(h, v.header)
	if err != nil {
		return err
	}
	var ts string
	var sigs [][]byte
	for item := range strings.SplitSeq(val, f.sep) {
		k, x, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return sigErr("malformed %s header", v.header)
		}
		switch k {
		case f.ts:
			if ts != "" {
				return sigErr("malformed %s header: two timestamps", v.header)
			}
			ts = x
		case f.sig:
			if b, ok := decodeHex(x); ok && len(sigs) < maxSignatures {
				sigs = append(sigs, b)
			}
		}
	}
	if ts == "" {
		return sigErr("malformed %s header: no %s", v.header, f.tsWord)
	}
	if len(sigs) == 0 {
		return sigErr("malformed %s header: no %s signature", v.header, f.sig)
	}
	t, err := v.checkTime(f.tsWord+" in "+v.header, ts, now)
	if err != nil {
		return err
	}
	return v.match(sigs, []byte(strconv.FormatInt(t, 10)), []byte(f.join), body)
}
