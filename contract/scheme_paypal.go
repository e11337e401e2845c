package contract

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"hash/crc32"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// paypal: PayPal's REST webhooks sign, with SHA256withRSA under the key of
// a PayPal certificate, the message
//
//	<PAYPAL-TRANSMISSION-ID>|<PAYPAL-TRANSMISSION-TIME>|<webhook id>|<CRC32 of the raw body, unsigned decimal>
//
// and send the signature base64 in PAYPAL-TRANSMISSION-SIG, the algorithm
// in PAYPAL-AUTH-ALGO and the certificate's address in PAYPAL-CERT-URL.
// The webhook id is the listener's own (the Developer Portal's, not the
// event's), so a delivery for another webhook fails.
//
// hookonce never fetches the certificate the request names: a URL chosen
// by whoever sends the request is a request forgery waiting to happen,
// and a proxy in front of a shop has no business reaching out while it
// judges a delivery. The operator pins PayPal's certificate (or its
// public key) in cert_file, PEM; several blocks are all accepted, so a
// certificate PayPal is rotating to can be added before it signs.
// PAYPAL-CERT-URL is read only to name, in a refusal, the certificate
// that signed (its CERT-… id, when the URL is on a PayPal host).
//
// The signature covers the body only through its CRC32, which anyone can
// match with four chosen bytes: the headers of one genuine delivery can
// carry another body. PayPal documents no window for
// PAYPAL-TRANSMISSION-TIME (and whether a retry is signed anew is not
// documented either), so none is applied by default; tolerance, when the
// operator sets it, refuses a transmission time further than that from
// the proxy's clock, which bounds how long captured headers stay usable.
type paypalVerifier struct {
	keys      []*rsa.PublicKey
	webhookID string
	tolerance time.Duration // 0: the transmission time is not judged
}

const paypalAlgo = "SHA256withRSA"

var paypalWebhookID = regexp.MustCompile(`^[A-Za-z0-9]{1,50}$`)

func buildPayPal(c *sigCompiler) Verifier {
	v := &paypalVerifier{webhookID: strings.TrimSpace(c.cfg.WebhookID)}
	if c.cfg.Tolerance != nil {
		if t := time.Duration(*c.cfg.Tolerance); t < time.Second {
			c.bad("tolerance", "%s is too short (minimum 1s)", t)
		} else {
			v.tolerance = t
		}
	}
	switch {
	case v.webhookID == "":
		c.bad("webhook_id", "required: the listener's webhook id from PayPal's Developer Portal (it is signed into every delivery)")
	case !paypalWebhookID.MatchString(v.webhookID):
		c.bad("webhook_id", "%q: want PayPal's webhook id, letters and digits", v.webhookID)
	}
	if c.cfg.CertFile == "" {
		c.bad("cert_file", "required: PayPal's signing certificate (PEM), downloaded once from the PAYPAL-CERT-URL of a genuine delivery")
		return v
	}
	path := c.cfg.CertFile
	if !filepath.IsAbs(path) && c.dir != "" {
		path = filepath.Join(c.dir, path)
	}
	data, err := readSecretFile(path)
	if err != nil {
		c.bad("cert_file", "read certificate: %v", err)
		return v
	}
	for len(data) > 0 {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		var pub any
		switch b.Type {
		case "CERTIFICATE":
			cert, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				c.bad("cert_file", "a CERTIFICATE block does not parse: %v", err)
				continue
			}
			pub = cert.PublicKey
		case "PUBLIC KEY":
			if pub, err = x509.ParsePKIXPublicKey(b.Bytes); err != nil {
				c.bad("cert_file", "a PUBLIC KEY block does not parse: %v", err)
				continue
			}
		default:
			c.bad("cert_file", "a %s block: want CERTIFICATE or PUBLIC KEY (PayPal's certificate, never a private key)", b.Type)
			continue
		}
		k, ok := pub.(*rsa.PublicKey)
		if !ok {
			c.bad("cert_file", "a key that is not RSA: PayPal signs with SHA256withRSA")
			continue
		}
		v.keys = append(v.keys, k)
	}
	if len(v.keys) == 0 && len(c.probs) == 0 {
		c.bad("cert_file", "no PEM certificate or public key in %s", c.cfg.CertFile)
	}
	return v
}

func (v *paypalVerifier) Verify(req *Request, now time.Time) error {
	h := req.Header
	one := func(name string) (string, error) {
		vals := h.Values(name)
		if len(vals) == 0 || strings.TrimSpace(vals[0]) == "" {
			return "", sigErr("no %s header", name)
		}
		if len(vals) > 1 {
			return "", sigErr("malformed %s header: sent more than once", name)
		}
		return strings.TrimSpace(vals[0]), nil
	}
	algo, err := one("Paypal-Auth-Algo")
	if err != nil {
		return err
	}
	if !strings.EqualFold(algo, paypalAlgo) {
		return sigErr("unsupported Paypal-Auth-Algo: want %s", paypalAlgo)
	}
	id, err := one("Paypal-Transmission-Id")
	if err != nil {
		return err
	}
	at, err := one("Paypal-Transmission-Time")
	if err != nil {
		return err
	}
	if v.tolerance > 0 {
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return sigErr("malformed Paypal-Transmission-Time header: want an RFC 3339 time")
		}
		if d := now.Sub(t); d > v.tolerance || d < -v.tolerance {
			return sigErr(ReasonTolerance)
		}
	}
	sigText, err := one("Paypal-Transmission-Sig")
	if err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(sigText)
	if err != nil || len(sig) < 128 || len(sig) > 1024 {
		return sigErr("malformed Paypal-Transmission-Sig header: want base64 of an RSA signature")
	}
	msg := id + "|" + at + "|" + v.webhookID + "|" + strconv.FormatUint(uint64(crc32.ChecksumIEEE(req.Body)), 10)
	sum := sha256.Sum256([]byte(msg))
	for _, k := range v.keys {
		if rsa.VerifyPKCS1v15(k, crypto.SHA256, sum[:], sig) == nil {
			return nil
		}
	}
	if cert := paypalCertName(h.Get("Paypal-Cert-Url")); cert != "" {
		return sigErr("%s (Paypal-Cert-Url names %s: is it the certificate in cert_file?)", ReasonMismatch, cert)
	}
	return sigErr(ReasonMismatch)
}

var paypalCertID = regexp.MustCompile(`^CERT-[A-Za-z0-9-]{1,80}$`)

// paypalCertName returns the CERT-… id of a certificate address on a
// PayPal host, for a refusal's hint; "" for anything else (it is the
// sender's text, so only that shape is ever repeated).
func paypalCertName(raw string) string {
	const api, sandbox = "https://api.paypal.com/", "https://api.sandbox.paypal.com/"
	for _, host := range []string{api, sandbox, "https://api-m.paypal.com/", "https://api-m.sandbox.paypal.com/"} {
		if rest, ok := strings.CutPrefix(raw, host); ok {
			name := rest[strings.LastIndexByte(rest, '/')+1:]
			if paypalCertID.MatchString(name) {
				return name
			}
		}
	}
	return ""
}

var _ Verifier = (*paypalVerifier)(nil)
