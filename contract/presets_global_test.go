package contract_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"hash/crc32"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

// The test's own Paddle signer, from Paddle's "Verify webhook signatures":
// HMAC-SHA256 of "ts:body", hex, in Paddle-Signature: ts=…;h1=….
func signPaddle(secret string, ts int64, body string) string {
	t := strconv.FormatInt(ts, 10)
	return "ts=" + t + ";h1=" + hex.EncodeToString(mac([]byte(secret), t, ":", body))
}

// paddleNote is one Paddle notification: an event rendered for one
// destination.
func paddleNote(event, notification, eventType, data string) string {
	return `{"event_id":"` + event + `","event_type":"` + eventType + `","occurred_at":"2026-01-15T11:00:00.000000Z","notification_id":"` +
		notification + `","data":` + data + `}`
}

const paddleSecret = "pdl_ntfset_01h_secret"

func paddleReq(t *testing.T, body string, at time.Time, sig ...string) *contract.Request {
	h := signPaddle(paddleSecret, at.Unix(), body)
	if len(sig) > 0 {
		h = sig[0]
	}
	return delivery(t, "POST", "/paddle", "application/json", body, "", "Paddle-Signature", h)
}

// TestPaddlePreset: one event to two destinations on one URL is two
// notifications (their own notification_id) and two keys; a retry of one
// notification, signed anew with a later ts, keeps its key and hash;
// another event is another key. Forged, stale and malformed signatures
// are refused without quoting what was sent; only a 2xx is a success.
func TestPaddlePreset(t *testing.T) {
	t.Setenv("PADDLE_SECRET", paddleSecret)
	s := mustSender(t, "preset: paddle", "signature: {secret_env: PADDLE_SECRET}")
	now := time.Now()
	data := `{"id":"txn_01h","status":"completed","details":{"totals":{"total":"1000"}}}`
	destA := paddleNote("evt_01hv1", "ntf_01hva", "transaction.completed", data)
	destB := paddleNote("evt_01hv1", "ntf_01hvb", "transaction.completed", data)
	other := paddleNote("evt_01hv2", "ntf_01hvc", "transaction.paid", data)
	noNtf := `{"event_id":"evt_01hv3","event_type":"transaction.paid","occurred_at":"2026-01-15T11:00:00Z","data":{}}`
	for _, tt := range []struct{ what, body, key string }{
		{"destination A", destA, "ntf_01hva"},
		{"destination B, the same event", destB, "ntf_01hvb"},
		{"another event", other, "ntf_01hvc"},
		{"no notification_id", noNtf, "evt_01hv3"},
	} {
		req := paddleReq(t, tt.body, now)
		if err := s.Verify(req, now); err != nil {
			t.Errorf("%s: signature: %v", tt.what, err)
		}
		key, err := s.Key(req)
		if err != nil || key != tt.key {
			t.Errorf("%s: key %q %v, want %q", tt.what, key, err, tt.key)
		}
		// Paddle's retry: the same notification, signed at a later ts.
		retry := paddleReq(t, tt.body, now.Add(90*time.Second))
		if err := s.Verify(retry, now.Add(90*time.Second)); err != nil {
			t.Errorf("%s retry: signature: %v", tt.what, err)
		}
		k2, _ := s.Key(retry)
		h1, _, _ := s.RequestHash(req)
		h2, _, _ := s.RequestHash(retry)
		if k2 != key || h1 != h2 {
			t.Errorf("%s: a retry reads key %q hash %s, the first %q %s", tt.what, k2, h2, key, h1)
		}
	}

	ts := strconv.FormatInt(now.Unix(), 10)
	good := signPaddle(paddleSecret, now.Unix(), destA)
	goodHex := good[strings.Index(good, "h1=")+3:]
	for _, tt := range []struct{ what, header, want string }{
		{"wrong secret", signPaddle("guess", now.Unix(), destA), contract.ReasonMismatch},
		{"another body's signature", signPaddle(paddleSecret, now.Unix(), destB), contract.ReasonMismatch},
		{"ts changed", "ts=" + strconv.FormatInt(now.Unix()+1, 10) + ";h1=" + goodHex, contract.ReasonMismatch},
		{"ten minutes old", signPaddle(paddleSecret, now.Add(-10*time.Minute).Unix(), destA), contract.ReasonTolerance},
		{"ten minutes ahead", signPaddle(paddleSecret, now.Add(10*time.Minute).Unix(), destA), contract.ReasonTolerance},
		{"no ts", "h1=" + goodHex, "no ts"},
		{"no h1", "ts=" + ts, "no h1"},
		{"h1 not hex", "ts=" + ts + ";h1=" + strings.Repeat("z", 64), "no h1"},
		{"two ts", "ts=" + ts + ";ts=" + ts + ";h1=" + goodHex, "two timestamps"},
		{"Stripe's layout", "t=" + ts + ",v1=" + goodHex, "malformed"},
	} {
		err := s.Verify(paddleReq(t, destA, now, tt.header), now)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.what, err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), goodHex) || strings.Contains(err.Error(), paddleSecret)) {
			t.Errorf("%s: the error quotes the signature or the secret: %v", tt.what, err)
		}
	}
	if err := s.Verify(delivery(t, "POST", "/paddle", "application/json", destA, ""), now); err == nil || !strings.Contains(err.Error(), "no Paddle-Signature header") {
		t.Errorf("unsigned: %v", err)
	}
	// Rotation: a header with the old and the new secret's h1 passes
	// under either secret.
	rotated := good + ";h1=" + hex.EncodeToString(mac([]byte("pdl_new"), ts, ":", destA))
	t.Setenv("PADDLE_NEW", "pdl_new")
	for _, env := range []string{"PADDLE_SECRET", "PADDLE_NEW"} {
		sr := mustSender(t, "preset: paddle", "signature: {secret_env: "+env+"}")
		if err := sr.Verify(paddleReq(t, destA, now, rotated), now); err != nil {
			t.Errorf("two h1 under %s: %v", env, err)
		}
	}
	// A narrower tolerance as Paddle's SDK judges it.
	narrow := mustSender(t, "preset: paddle", "signature: {secret_env: PADDLE_SECRET, tolerance: 5s}")
	if err := narrow.Verify(paddleReq(t, destA, now.Add(-30*time.Second)), now); err == nil {
		t.Error("tolerance: 5s accepted a ts 30s old")
	}

	// Paddle retries anything but a 2xx: only a 2xx is stored.
	for status, want := range map[int]bool{200: true, 204: true, 299: true, 301: false, 403: false, 404: false, 410: false, 500: false} {
		if ok, why := s.Succeeded(paddleReq(t, destA, now), status, nil); ok != want {
			t.Errorf("status %d: success %v (%s), want %v", status, ok, why, want)
		}
	}
	if s.RetryWindow != 72*time.Hour || s.TTL < 72*time.Hour {
		t.Errorf("retry window %s ttl %s, want Paddle's three days", s.RetryWindow, s.TTL)
	}
}

// TestMolliePreset: Mollie posts only the object's id, the same for every
// status change, and signs nothing: every delivery goes to the site
// without dedupe, serialized by the id, and needs no secret.
func TestMolliePreset(t *testing.T) {
	s := mustSender(t, "preset: mollie")
	if s.HasSignature() || !s.DedupeOff() || len(s.Keys) != 0 {
		t.Fatalf("signature %v, dedupe off %v, keys %v: want unsigned, every delivery forwarded", s.HasSignature(), s.DedupeOff(), s.Keys)
	}
	open := delivery(t, "POST", "/mollie", formType, "id=tr_5B8cwPMGnU6qLbRvo7qEZo", "", "User-Agent", "Mollie HTTP client/1.0")
	paid := delivery(t, "POST", "/mollie", formType, "id=tr_5B8cwPMGnU6qLbRvo7qEZo", "", "User-Agent", "Mollie HTTP client/1.0")
	for _, req := range []*contract.Request{open, paid} {
		if err := s.Verify(req, time.Now()); err != nil {
			t.Errorf("an unsigned Mollie call: %v", err)
		}
		reason, ok := s.Passthrough(req, nil)
		if !ok || !strings.Contains(reason, "every status change") {
			t.Errorf("a Mollie call is not forwarded without dedupe (%q %v)", reason, ok)
		}
		if obj, err := s.ObjectKey(req); err != nil || obj != "tr_5B8cwPMGnU6qLbRvo7qEZo" {
			t.Errorf("serialized by %q %v, want the payment id", obj, err)
		}
	}
	if s.Serialize == nil || s.Serialize.Scope != "s" || s.Serialize.Wait != s.UpstreamTimeout {
		t.Errorf("serialize %+v, want the sender's scope and upstream timeout", s.Serialize)
	}
	// The operator's serialize and a token of the operator's own win.
	t.Setenv("MOLLIE_TOKEN", "tok-1")
	own := mustSender(t, "preset: mollie", "serialize: {key: [{query: order}]}",
		"signature: {scheme: token, from: [{query: token}], secret_env: MOLLIE_TOKEN}")
	if len(own.Serialize.Keys) != 1 || own.Serialize.Keys[0].Name != "order" {
		t.Errorf("the file's serialize: %+v", own.Serialize)
	}
	if err := own.Verify(delivery(t, "POST", "/mollie?token=guess", formType, "id=tr_1", ""), time.Now()); err == nil {
		t.Error("a wrong token passed the operator's token check")
	}
	if err := own.Verify(delivery(t, "POST", "/mollie?token=tok-1", formType, "id=tr_1", ""), time.Now()); err != nil {
		t.Errorf("the operator's token: %v", err)
	}
}

// paypalKey is a self-made PayPal stand-in: an RSA key and a self-signed
// certificate for it, written as PEM to a file the sender pins.
type paypalKey struct {
	key      *rsa.PrivateKey
	certFile string
	keyFile  string // the private key, PEM, for openssl
}

func newPayPalKey(t *testing.T, bits int) paypalKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "messageverificationcerts.paypal.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pk := paypalKey{key: k, certFile: filepath.Join(dir, "paypal-cert.pem"), keyFile: filepath.Join(dir, "key.pem")}
	writePEM(t, pk.certFile, "CERTIFICATE", der)
	writePEM(t, pk.keyFile, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(k))
	return pk
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// paypalMessage is PayPal's signed text, from its documentation:
// transmission id, transmission time, the listener's webhook id and the
// CRC32 of the raw body as an unsigned decimal, joined with "|".
func paypalMessage(id, at, webhookID, body string) string {
	return id + "|" + at + "|" + webhookID + "|" + strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10)
}

func (k paypalKey) sign(t *testing.T, msg string) string {
	sum := sha256.Sum256([]byte(msg))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k.key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(sig)
}

const paypalWebhookID = "1JE4291016473214C"

// paypalReq is a PayPal delivery; extra replaces the named headers.
func paypalReq(t *testing.T, body, id, at, sig string, extra ...string) *contract.Request {
	kv := []string{"Paypal-Transmission-Id", id, "Paypal-Transmission-Time", at, "Paypal-Transmission-Sig", sig,
		"Paypal-Auth-Algo", "SHA256withRSA", "Paypal-Cert-Url", "https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-bb6a8ea6"}
	for i := 0; i+1 < len(extra); i += 2 {
		for j := 0; j < len(kv); j += 2 {
			if kv[j] == extra[i] {
				kv[j+1] = extra[i+1]
			}
		}
	}
	return delivery(t, "POST", "/paypal", "application/json", body, "", kv...)
}

func paypalEvent(id, eventType, resource string) string {
	return `{"id":"` + id + `","event_version":"1.0","create_time":"2026-01-15T11:00:00.000Z","resource_type":"capture","event_type":"` + eventType +
		`","summary":"Payment completed for $ 21.0 USD","resource":{"id":"` + resource + `","status":"COMPLETED","amount":{"currency_code":"USD","value":"21.00"}}}`
}

// TestPayPalPreset: PayPal's events keyed by their WH- id, each retry (a
// new transmission, signed anew) the same key and hash; deliveries signed
// by the pinned certificate pass, everything else is refused with a
// reason that quotes nothing sent; the signature is also checked against
// openssl's; only a 2xx is a success.
func TestPayPalPreset(t *testing.T) {
	pk := newPayPalKey(t, 2048)
	s := mustSender(t, "preset: paypal", "signature: {cert_file: "+pk.certFile+", webhook_id: "+paypalWebhookID+"}")
	now := time.Now()
	at := now.UTC().Format(time.RFC3339)
	captured := paypalEvent("WH-58D329510W468432D-8HN650336L201105X", "PAYMENT.CAPTURE.COMPLETED", "42311647XV020574X")
	refunded := paypalEvent("WH-1GE84257G0350133W-6RW800890C634293G", "PAYMENT.CAPTURE.REFUNDED", "42311647XV020574X")
	for _, tt := range []struct{ what, body, key string }{
		{"a capture completed", captured, "WH-58D329510W468432D-8HN650336L201105X"},
		{"its refund, same resource", refunded, "WH-1GE84257G0350133W-6RW800890C634293G"},
	} {
		req := paypalReq(t, tt.body, "69cd13f0-d67a-11e5-baa3-778b53f4ae55", at, pk.sign(t, paypalMessage("69cd13f0-d67a-11e5-baa3-778b53f4ae55", at, paypalWebhookID, tt.body)))
		if err := s.Verify(req, now); err != nil {
			t.Errorf("%s: signature: %v", tt.what, err)
		}
		key, err := s.Key(req)
		if err != nil || key != tt.key {
			t.Errorf("%s: key %q %v, want %q", tt.what, key, err, tt.key)
		}
		at2 := now.Add(time.Hour).UTC().Format(time.RFC3339)
		retry := paypalReq(t, tt.body, "7a1f2e00-d67b-11e5-baa3-778b53f4ae55", at2, pk.sign(t, paypalMessage("7a1f2e00-d67b-11e5-baa3-778b53f4ae55", at2, paypalWebhookID, tt.body)))
		if err := s.Verify(retry, now); err != nil {
			t.Errorf("%s: PayPal's retry, an hour later: %v", tt.what, err)
		}
		k2, _ := s.Key(retry)
		h1, _, _ := s.RequestHash(req)
		h2, _, _ := s.RequestHash(retry)
		if k2 != key || h1 != h2 {
			t.Errorf("%s: a retry reads key %q hash %s, the first %q %s", tt.what, k2, h2, key, h1)
		}
	}

	// The CRC is the unsigned decimal: the check value of "123456789" is
	// 0xCBF43926, 3421780262, which as a signed int32 would be negative.
	if msg := paypalMessage("t", "a", "w", "123456789"); msg != "t|a|w|3421780262" {
		t.Fatalf("the test's own message: %q", msg)
	}
	crcBody := "123456789"
	if err := s.Verify(paypalReq(t, crcBody, "t1", at, pk.sign(t, "t1|"+at+"|"+paypalWebhookID+"|3421780262")), now); err != nil {
		t.Errorf("a body whose CRC32 has the high bit set: %v", err)
	}

	// openssl's signature over the same message passes too.
	msg := paypalMessage("os-1", at, paypalWebhookID, captured)
	cmd := exec.Command("openssl", "dgst", "-sha256", "-sign", pk.keyFile)
	cmd.Stdin = strings.NewReader(msg)
	if out, err := cmd.Output(); err != nil {
		t.Logf("openssl unavailable (%v): its signature is not compared", err)
	} else if err := s.Verify(paypalReq(t, captured, "os-1", at, base64.StdEncoding.EncodeToString(out)), now); err != nil {
		t.Errorf("a signature made by openssl: %v", err)
	}

	other := newPayPalKey(t, 2048)
	good := pk.sign(t, paypalMessage("id-1", at, paypalWebhookID, captured))
	for _, tt := range []struct {
		what string
		req  *contract.Request
		want string
	}{
		{"another certificate's key", paypalReq(t, captured, "id-1", at, other.sign(t, paypalMessage("id-1", at, paypalWebhookID, captured))), "CERT-360caa42-fca2a594-bb6a8ea6"},
		{"another webhook's delivery", paypalReq(t, captured, "id-1", at, pk.sign(t, paypalMessage("id-1", at, "9XL90610J3647323C", captured))), contract.ReasonMismatch},
		{"the body changed", paypalReq(t, refunded, "id-1", at, good), contract.ReasonMismatch},
		{"the transmission id changed", paypalReq(t, captured, "id-2", at, good), contract.ReasonMismatch},
		{"the transmission time changed", paypalReq(t, captured, "id-1", now.Add(time.Second).UTC().Format(time.RFC3339), good), contract.ReasonMismatch},
		{"another algorithm", paypalReq(t, captured, "id-1", at, good, "Paypal-Auth-Algo", "SHA1withRSA"), "unsupported Paypal-Auth-Algo"},
		{"not base64", paypalReq(t, captured, "id-1", at, "!!"+good[2:]), "malformed Paypal-Transmission-Sig"},
		{"a short signature", paypalReq(t, captured, "id-1", at, base64.StdEncoding.EncodeToString([]byte("short"))), "malformed Paypal-Transmission-Sig"},
		{"no signature", delivery(t, "POST", "/paypal", "application/json", captured, "", "Paypal-Auth-Algo", "SHA256withRSA", "Paypal-Transmission-Id", "id-1", "Paypal-Transmission-Time", at), "no Paypal-Transmission-Sig header"},
		{"a cert URL elsewhere", paypalReq(t, captured, "id-1", at, other.sign(t, paypalMessage("id-1", at, paypalWebhookID, captured)), "Paypal-Cert-Url", "https://evil.example/CERT-1"), contract.ReasonMismatch},
	} {
		err := s.Verify(tt.req, now)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.what, err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), good[:20]) || strings.Contains(err.Error(), "evil")) {
			t.Errorf("%s: the reason quotes what was sent: %v", tt.what, err)
		}
	}

	// An operator's tolerance judges the transmission time.
	tight := mustSender(t, "preset: paypal", "signature: {cert_file: "+pk.certFile+", webhook_id: "+paypalWebhookID+", tolerance: 10m}")
	old := now.Add(-time.Hour).UTC().Format(time.RFC3339)
	if err := tight.Verify(paypalReq(t, captured, "id-1", old, pk.sign(t, paypalMessage("id-1", old, paypalWebhookID, captured))), now); err == nil || !strings.Contains(err.Error(), contract.ReasonTolerance) {
		t.Errorf("tolerance 10m, an hour-old transmission: %v", err)
	}
	if err := tight.Verify(paypalReq(t, captured, "id-1", at, good), now); err != nil {
		t.Errorf("tolerance 10m, a fresh transmission: %v", err)
	}

	// PayPal retries anything but a 2xx.
	for status, want := range map[int]bool{200: true, 202: true, 404: false, 403: false, 500: false} {
		if ok, _ := s.Succeeded(paypalReq(t, captured, "id-1", at, good), status, nil); ok != want {
			t.Errorf("status %d: success %v, want %v", status, ok, want)
		}
	}
}

// TestPayPalConfig: the certificate and the webhook id are required and
// checked when the file is loaded; a private key, a non-RSA key and the
// fields on another scheme are refused by name.
func TestPayPalConfig(t *testing.T) {
	pk := newPayPalKey(t, 2048)
	dir := t.TempDir()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	ecFile := filepath.Join(dir, "ec.pem")
	writePEM(t, ecFile, "PUBLIC KEY", ecDER)
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("not a pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Two blocks (a certificate being rotated to, as a bare public key).
	both := filepath.Join(dir, "both.pem")
	other := newPayPalKey(t, 2048)
	pubDER, _ := x509.MarshalPKIXPublicKey(&other.key.PublicKey)
	certPEM, _ := os.ReadFile(pk.certFile)
	if err := os.WriteFile(both, append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})...), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ sig, want string }{
		{"{webhook_id: " + paypalWebhookID + "}", "signature.cert_file: required"},
		{"{cert_file: " + pk.certFile + "}", "signature.webhook_id: required"},
		{"{cert_file: " + pk.certFile + ", webhook_id: 'WH id'}", "signature.webhook_id"},
		{"{cert_file: " + filepath.Join(dir, "missing.pem") + ", webhook_id: X1}", "signature.cert_file: read certificate"},
		{"{cert_file: " + empty + ", webhook_id: X1}", "no PEM certificate"},
		{"{cert_file: " + ecFile + ", webhook_id: X1}", "not RSA"},
		{"{cert_file: " + pk.keyFile + ", webhook_id: X1}", "never a private key"},
		{"{cert_file: " + pk.certFile + ", webhook_id: X1, secret_env: HOME}", "takes no secret"},
		{"{scheme: stripe, secret_env: HOME, webhook_id: X1}", "webhook_id: does not apply"},
	} {
		_, err := contract.Parse([]byte(senderYAML("preset: paypal", "signature: "+tt.sig)), "x.yaml")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.sig, err, tt.want)
		}
	}
	s := mustSender(t, "preset: paypal", "signature: {cert_file: "+both+", webhook_id: "+paypalWebhookID+"}")
	at := time.Now().UTC().Format(time.RFC3339)
	body := paypalEvent("WH-1", "PAYMENT.CAPTURE.COMPLETED", "R1")
	for _, k := range []paypalKey{pk, other} {
		if err := s.Verify(paypalReq(t, body, "i", at, k.sign(t, paypalMessage("i", at, paypalWebhookID, body))), time.Now()); err != nil {
			t.Errorf("a key of the two in cert_file: %v", err)
		}
	}
}
