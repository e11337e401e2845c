package contract

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Scheme hmac-sha256 (the generic header: <prefix><hex or base64> of the
// body's HMAC-SHA256), and hmacVerifier, which it shares with the
// providers' HMAC-header schemes: one file per provider's header format
// (scheme_stripe.go, scheme_github.go, …). The generic schemes over a
// built message, digest and hmac, are in scheme_digest_hmac.go.

// buildHMACBody compiles the schemes that sign the raw body with
// HMAC-SHA256 in one sender's arrangement.
func (c *sigCompiler) buildHMACBody() Verifier {
	cfg, def := c.cfg, c.def
	v := &hmacVerifier{scheme: cfg.Scheme, header: def.header, encoding: "hex", keys: c.keys}
	if cfg.Header != "" {
		v.header = cfg.Header
	}
	v.header = http.CanonicalHeaderKey(strings.TrimSpace(v.header))
	if v.header == "" {
		c.bad("header", "required for scheme %s", cfg.Scheme)
	}
	if def.fixedFmt {
		if cfg.Encoding != "" {
			c.bad("encoding", "only applies to scheme hmac-sha256 (%s fixes its own)", cfg.Scheme)
		}
		if cfg.Prefix != "" {
			c.bad("prefix", "only applies to scheme hmac-sha256 (%s fixes its own)", cfg.Scheme)
		}
	} else {
		switch cfg.Encoding {
		case "", "hex":
		case "base64":
			v.encoding = "base64"
		default:
			c.bad("encoding", "%q: want hex or base64", cfg.Encoding)
		}
		v.prefix = cfg.Prefix
	}
	if def.timed {
		v.tolerance = DefaultTolerance
		if cfg.Tolerance != nil {
			if t := time.Duration(*cfg.Tolerance); t < time.Second {
				c.bad("tolerance", "%s is too short (minimum 1s)", t)
			} else {
				v.tolerance = t
			}
		}
	} else if cfg.Tolerance != nil {
		c.bad("tolerance", "scheme %s signs no timestamp", cfg.Scheme)
	}
	return v
}

// hmacVerifier checks the sender-specific schemes in this file: all are
// HMAC-SHA256 over some arrangement of the raw body, with one or two keys
// (rotation). The generic schemes have verifiers of their own.
type hmacVerifier struct {
	scheme    string
	header    string // canonical
	encoding  string // hmac-sha256: hex | base64
	prefix    string // hmac-sha256
	tolerance time.Duration
	keys      [][]byte // current first, previous second
}

// maxSignatures bounds the candidates taken from one header, so a huge
// header cannot cost more than a few comparisons per key.
const maxSignatures = 16

func (v *hmacVerifier) Verify(req *Request, now time.Time) error {
	h, body := req.Header, req.Body
	switch v.scheme {
	case SchemeStripe:
		return v.stripe(h, body, now)
	case SchemeGitHub:
		return v.github(h, body)
	case SchemeShopify:
		return v.shopify(h, body)
	case SchemeStandardWebhooks:
		return v.standardWebhooks(h, body, now)
	case SchemeSlack:
		return v.slack(h, body, now)
	case SchemePaddle:
		return v.paddle(h, body, now)
	default:
		return v.generic(h, body)
	}
}

// value returns the single value of a header, or why there is none.
func (v *hmacVerifier) value(h http.Header, name string) (string, error) {
	vals := h.Values(name)
	if len(vals) == 0 || strings.TrimSpace(vals[0]) == "" {
		return "", sigErr("no %s header", name)
	}
	if len(vals) > 1 {
		return "", sigErr("malformed %s header: sent more than once", name)
	}
	return strings.TrimSpace(vals[0]), nil
}

// match reports whether any candidate equals the MAC of msg under any key,
// in constant time per comparison; every key is tried, so the time does
// not tell which of several current secrets signed it.
func (v *hmacVerifier) match(candidates [][]byte, msg ...[]byte) error {
	found := false
	for _, key := range v.keys {
		m := hmac.New(sha256.New, key)
		for _, part := range msg {
			m.Write(part)
		}
		want := m.Sum(nil)
		for _, c := range candidates {
			found = hmac.Equal(c, want) || found
		}
	}
	if found {
		return nil
	}
	return sigErr(ReasonMismatch)
}

func (v *hmacVerifier) checkTime(header, ts string, now time.Time) (int64, error) {
	t, ok := parseUnix(ts)
	if !ok {
		return 0, sigErr("malformed %s: want Unix seconds", header)
	}
	d := now.Sub(time.Unix(t, 0))
	if d > v.tolerance || d < -v.tolerance {
		return 0, sigErr(ReasonTolerance)
	}
	return t, nil
}

// parseUnix accepts decimal seconds only (no sign, at most 12 digits).
func parseUnix(s string) (int64, bool) {
	if s == "" || len(s) > 12 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func decodeHex(s string) ([]byte, bool) {
	if len(s) != 2*sha256.Size {
		return nil, false
	}
	b, err := hex.DecodeString(s)
	return b, err == nil
}

func decodeBase64(s string) ([]byte, bool) {
	if len(s) != base64.StdEncoding.EncodedLen(sha256.Size) {
		return nil, false
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	return b, err == nil && len(b) == sha256.Size
}

// generic: <header>: <prefix><hex or base64> over the body.
func (v *hmacVerifier) generic(h http.Header, body []byte) error {
	val, err := v.value(h, v.header)
	if err != nil {
		return err
	}
	enc, ok := strings.CutPrefix(val, v.prefix)
	if !ok {
		return sigErr("malformed %s header: missing prefix %q", v.header, v.prefix)
	}
	var sig []byte
	if v.encoding == "base64" {
		sig, ok = decodeBase64(enc)
	} else {
		sig, ok = decodeHex(enc)
	}
	if !ok {
		return sigErr("malformed %s header: want %s of 32 bytes", v.header, v.encoding)
	}
	return v.match([][]byte{sig}, body)
}

var _ Verifier = (*hmacVerifier)(nil)
