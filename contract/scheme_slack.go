package contract

import (
	"net/http"
	"strings"
	"time"
)

// slack: X-Slack-Signature: v0=<hex> over "v0:<X-Slack-Request-Timestamp>:<body>".
func (v *hmacVerifier) slack(h http.Header, body []byte, now time.Time) error {
	val, err := v.value(h, v.header)
	if err != nil {
		return err
	}
	ts, err := v.value(h, "X-Slack-Request-Timestamp")
	if err != nil {
		return err
	}
	hexSig, ok := strings.CutPrefix(val, "v0=")
	if !ok {
		return sigErr("malformed %s header: want v0=<hex>", v.header)
	}
	sig, ok := decodeHex(hexSig)
	if !ok {
		return sigErr("malformed %s header: want 64 hex digits", v.header)
	}
	if _, err := v.checkTime("X-Slack-Request-Timestamp header", ts, now); err != nil {
		return err
	}
	// Slack signs the timestamp as sent; parseUnix allowed digits only.
	return v.match([][]byte{sig}, []byte("v0:"), []byte(ts), []byte(":"), body)
}
