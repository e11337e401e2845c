package contract

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// standardWebhooks: webhook-id, webhook-timestamp and webhook-signature
// ("v1,<base64> v1,<base64>…") over "<id>.<timestamp>.<body>".
func (v *hmacVerifier) standardWebhooks(h http.Header, body []byte, now time.Time) error {
	id, err := v.value(h, "Webhook-Id")
	if err != nil {
		return err
	}
	tsVal, err := v.value(h, "Webhook-Timestamp")
	if err != nil {
		return err
	}
	val, err := v.value(h, v.header)
	if err != nil {
		return err
	}
	var sigs [][]byte
	for item := range strings.FieldsSeq(val) {
		ver, x, ok := strings.Cut(item, ",")
		if !ok || ver != "v1" {
			continue // other versions (v1a is asymmetric) are not ours to check
		}
		if b, ok := decodeBase64(x); ok && len(sigs) < maxSignatures {
			sigs = append(sigs, b)
		}
	}
	if len(sigs) == 0 {
		return sigErr("malformed %s header: no v1 signature", v.header)
	}
	t, err := v.checkTime("Webhook-Timestamp header", tsVal, now)
	if err != nil {
		return err
	}
	return v.match(sigs, []byte(id), []byte("."), []byte(strconv.FormatInt(t, 10)), []byte("."), body)
}
