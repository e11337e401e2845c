package contract

import (
	"net/http"
	"strings"
)

// github: X-Hub-Signature-256: sha256=<hex> over the body.
func (v *hmacVerifier) github(h http.Header, body []byte) error {
	val, err := v.value(h, v.header)
	if err != nil {
		return err
	}
	hexSig, ok := strings.CutPrefix(val, "sha256=")
	if !ok {
		return sigErr("malformed %s header: want sha256=<hex>", v.header)
	}
	sig, ok := decodeHex(hexSig)
	if !ok {
		return sigErr("malformed %s header: want 64 hex digits", v.header)
	}
	return v.match([][]byte{sig}, body)
}
