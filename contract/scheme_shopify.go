package contract

import "net/http"

// shopify: X-Shopify-Hmac-Sha256: <base64> over the body.
func (v *hmacVerifier) shopify(h http.Header, body []byte) error {
	val, err := v.value(h, v.header)
	if err != nil {
		return err
	}
	sig, ok := decodeBase64(val)
	if !ok {
		return sigErr("malformed %s header: want base64 of 32 bytes", v.header)
	}
	return v.match([][]byte{sig}, body)
}
