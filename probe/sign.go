package probe

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A signer adds a scheme's signature headers to a delivery, the way the
// sender itself would sign it, so the probe passes hookonce's check.
type signer func(h http.Header, secret, key string, body []byte, now time.Time)

var signers = map[string]signer{
	"stripe": func(h http.Header, secret, _ string, body []byte, now time.Time) {
		ts := strconv.FormatInt(now.Unix(), 10)
		h.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(mac([]byte(secret), []byte(ts), []byte("."), body)))
	},
	"github": func(h http.Header, secret, _ string, body []byte, _ time.Time) {
		h.Set("X-GitHub-Event", "ping")
		h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac([]byte(secret), body)))
	},
	"shopify": func(h http.Header, secret, _ string, body []byte, _ time.Time) {
		h.Set("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(mac([]byte(secret), body)))
	},
	"standard-webhooks": func(h http.Header, secret, key string, body []byte, now time.Time) {
		ts := strconv.FormatInt(now.Unix(), 10)
		h.Set("Webhook-Id", key)
		h.Set("Webhook-Timestamp", ts)
		h.Set("Webhook-Signature", "v1,"+base64.StdEncoding.EncodeToString(
			mac(whsecKey(secret), []byte(key), []byte("."), []byte(ts), []byte("."), body)))
	},
	"slack": func(h http.Header, secret, _ string, body []byte, now time.Time) {
		ts := strconv.FormatInt(now.Unix(), 10)
		h.Set("X-Slack-Request-Timestamp", ts)
		h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac([]byte(secret), []byte("v0:"+ts+":"), body)))
	},
	// hmac-sha256 with its defaults as the probe assumes them: hex digest
	// of the body in X-Signature. Other layouts: sign by hand.
	"hmac-sha256": func(h http.Header, secret, _ string, body []byte, _ time.Time) {
		h.Set("X-Signature", hex.EncodeToString(mac([]byte(secret), body)))
	},
}

// schemeKey is where each scheme's preset looks for the event id.
func schemeKey(scheme string) (header, field string) {
	switch scheme {
	case "github":
		return "X-GitHub-Delivery", ""
	case "shopify":
		return "X-Shopify-Event-Id", ""
	case "standard-webhooks":
		return "Webhook-Id", ""
	case "slack":
		return "", "event_id"
	}
	return "", ""
}

func schemeList() string {
	names := make([]string, 0, len(signers))
	for n := range signers {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func mac(secret []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// whsecKey decodes a Standard Webhooks secret ("whsec_" + base64); a secret
// without the prefix is used as raw bytes.
func whsecKey(secret string) []byte {
	if s, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			return b
		}
	}
	return []byte(secret)
}
