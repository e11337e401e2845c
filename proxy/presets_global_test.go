package proxy_test

// The presets for Paddle Billing, Mollie, PayPal and Yandex Pay end to end: deliveries signed
// as each provider documents (the signers here share no code with
// contract/), sent through a proxy in front of a counting site, judged by
// executions of the site's handler.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"hash/crc32"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookonce/hookonce/proxy/proxytest"
)

const globalSecret = "pdl_ntfset_hookonce_test"

func paddleSig(secret string, at time.Time, body string) string {
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + ":" + body))
	return "ts=" + ts + ";h1=" + hex.EncodeToString(m.Sum(nil))
}

// TestPaddleThroughProxy: one event to two destinations on one URL runs
// once per destination; each destination's retries (signed anew) and a
// burst of them are replayed; a changed payload under a notification id
// is refused; a forged delivery never runs; a site's 404 is handed back
// and frees the claim, so Paddle's retry runs the handler and its 200 is
// what later retries get.
func TestPaddleThroughProxy(t *testing.T) {
	t.Setenv("PADDLE_SECRET", globalSecret)
	var notFound atomic.Bool
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if notFound.Load() {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, `{"received":true}`)
	})
	px := proxytest.Start(t, newStore(t), site.URL, `
senders:
  - name: paddle
    preset: paddle
    match: { path: /paddle/webhook.php }
    signature: { secret_env: PADDLE_SECRET }
`)
	note := func(event, ntf, eventType string) string {
		return `{"event_id":"` + event + `","event_type":"` + eventType + `","occurred_at":"2026-01-15T11:00:00.000000Z","notification_id":"` + ntf +
			`","data":{"id":"txn_01hv","status":"completed","customer_id":"ctm_01h"}}`
	}
	send := func(body, label string, at time.Time, secret string) proxytest.Reply {
		return bxSend(t, http.MethodPost, px.URL+"/paddle/webhook.php", "application/json", body,
			"X-Event-Id", label, "Paddle-Signature", paddleSig(secret, at, body))
	}
	now := time.Now()
	destA := note("evt_01hv1", "ntf_01hva", "transaction.completed")
	destB := note("evt_01hv1", "ntf_01hvb", "transaction.completed")

	for _, d := range []struct{ body, label string }{{destA, "dest-a"}, {destB, "dest-b"}} {
		if r := send(d.body, d.label, now, globalSecret); r.Status != 200 || r.Replayed() {
			t.Fatalf("%s: %d %q replayed=%v\n%s", d.label, r.Status, r.Body, r.Replayed(), px.Logs.String())
		}
	}
	// Paddle's retries of each notification, signed at later times, one
	// of them as a burst.
	if r := send(destA, "dest-a", now.Add(time.Minute), globalSecret); r.Status != 200 || !r.Replayed() || string(r.Body) != `{"received":true}` {
		t.Errorf("a retry of destination A: %d %q replayed=%v, want the stored answer", r.Status, r.Body, r.Replayed())
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); send(destB, "dest-b", now.Add(time.Duration(i)*time.Second), globalSecret) }()
	}
	wg.Wait()
	for _, label := range []string{"dest-a", "dest-b"} {
		if n := site.Executions(label); n != 1 {
			t.Errorf("%s ran %d times, want 1 (one run per destination)", label, n)
		}
	}

	// The same notification id with another payload is a conflict.
	if r := send(strings.Replace(destA, "completed", "past_due", 1), "dest-a-changed", now, globalSecret); r.Status != 422 {
		t.Errorf("a changed payload under ntf_01hva: %d, want 422", r.Status)
	}
	// Forged: the wrong secret, and a signature from ten minutes ago.
	if r := send(note("evt_x", "ntf_x", "transaction.completed"), "forged", now, "guess"); r.Status != http.StatusUnauthorized {
		t.Errorf("a wrong secret: %d, want 401", r.Status)
	}
	if r := send(note("evt_y", "ntf_y", "transaction.completed"), "forged", now.Add(-10*time.Minute), globalSecret); r.Status != http.StatusUnauthorized {
		t.Errorf("a stale signature: %d, want 401", r.Status)
	}
	if n := site.Executions("dest-a-changed") + site.Executions("forged"); n != 0 {
		t.Errorf("refused deliveries ran %d times", n)
	}

	// A deploy's 404 is not delivered: Paddle retries, and the retry runs.
	late := note("evt_01hv9", "ntf_01hv9", "subscription.activated")
	notFound.Store(true)
	if r := send(late, "late", now, globalSecret); r.Status != 404 || r.Replayed() {
		t.Errorf("the site's 404: %d replayed=%v, want it handed back", r.Status, r.Replayed())
	}
	notFound.Store(false)
	if r := send(late, "late", now.Add(time.Minute), globalSecret); r.Status != 200 || r.Replayed() {
		t.Errorf("Paddle's retry after a 404: %d replayed=%v, want it run", r.Status, r.Replayed())
	}
	if r := send(late, "late", now.Add(2*time.Minute), globalSecret); r.Status != 200 || !r.Replayed() {
		t.Errorf("the next retry: %d replayed=%v, want the stored 200", r.Status, r.Replayed())
	}
	if n := site.Executions("late"); n != 2 {
		t.Errorf("the site ran the event %d times, want 2 (the 404, then the 200)", n)
	}
	if strings.Contains(px.Logs.String(), globalSecret) {
		t.Error("the logs hold the secret")
	}
}

// TestMollieThroughProxy: Mollie posts id=tr_… for every status change of
// a payment, unsigned. Each post reaches the site (none is replayed, the
// paid one is never swallowed), and posts about one payment run one at a
// time.
func TestMollieThroughProxy(t *testing.T) {
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(40 * time.Millisecond) // the handler fetches the payment from Mollie
		w.WriteHeader(http.StatusOK)
	})
	px := proxytest.Start(t, newStore(t), site.URL, `
senders:
  - name: mollie
    preset: mollie
    match: { path: /mollie/webhook.php }
`)
	send := func(id, label string) proxytest.Reply {
		return bxSend(t, http.MethodPost, px.URL+"/mollie/webhook.php", bxForm, "id="+id,
			"X-Event-Id", label, "User-Agent", "Mollie HTTP client/1.0")
	}
	for _, status := range []string{"open", "paid"} {
		if r := send("tr_5B8cwPMGnU6qLbRvo7qEZo", "tr-5b8"); r.Status != 200 || r.Replayed() {
			t.Fatalf("the %s notification: %d replayed=%v\n%s", status, r.Status, r.Replayed(), px.Logs.String())
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); send("tr_5B8cwPMGnU6qLbRvo7qEZo", "tr-5b8") }()
	}
	wg.Wait()
	if n := site.Executions("tr-5b8"); n != 6 {
		t.Errorf("the site ran %d of Mollie's 6 posts, want every one", n)
	}
	if p := site.Peak(); p != 1 {
		t.Errorf("%d posts about one payment ran at once, want 1 (serialized by id)", p)
	}
	if !strings.Contains(px.Logs.String(), "every status change") {
		t.Errorf("the passthrough was not logged with its reason:\n%s", px.Logs.String())
	}
}

// TestPayPalThroughProxy: a PayPal event signed by the pinned certificate
// runs once; PayPal's retries (new transmissions, signed anew) and a
// burst of them are replayed; a changed body under the event id is a
// conflict; a delivery signed by another key, or meant for another
// webhook, never runs; a 500 from the site frees the claim for the retry.
func TestPayPalThroughProxy(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	forger, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(7), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certFile := filepath.Join(t.TempDir(), "paypal.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	var failing atomic.Bool
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	const webhookID = "8PT597110X687430L"
	px := proxytest.Start(t, newStore(t), site.URL, `
senders:
  - name: paypal
    preset: paypal
    match: { path: /paypal/webhook.php }
    signature: { cert_file: `+certFile+`, webhook_id: `+webhookID+` }
`)
	var transmission atomic.Int64
	send := func(body, label string, signer *rsa.PrivateKey, hook string) proxytest.Reply {
		id := "b2384410-f8d2-11ec-" + strconv.FormatInt(1000+transmission.Add(1), 10)
		at := time.Now().UTC().Format(time.RFC3339)
		msg := id + "|" + at + "|" + hook + "|" + strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10)
		sum := sha256.Sum256([]byte(msg))
		sig, err := rsa.SignPKCS1v15(rand.Reader, signer, crypto.SHA256, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		return bxSend(t, http.MethodPost, px.URL+"/paypal/webhook.php", "application/json", body, "X-Event-Id", label,
			"Paypal-Transmission-Id", id, "Paypal-Transmission-Time", at, "Paypal-Transmission-Sig", base64.StdEncoding.EncodeToString(sig),
			"Paypal-Auth-Algo", "SHA256withRSA", "Paypal-Cert-Url", "https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-bb6a8ea6")
	}
	event := func(id, status string) string {
		return `{"id":"` + id + `","event_version":"1.0","event_type":"PAYMENT.CAPTURE.COMPLETED","resource_type":"capture","resource":{"id":"42311647XV020574X","status":"` + status + `"}}`
	}
	captured := event("WH-58D329510W468432D-8HN650336L201105X", "COMPLETED")
	if r := send(captured, "capture", key, webhookID); r.Status != 200 || r.Replayed() {
		t.Fatalf("a signed event: %d %q replayed=%v\n%s", r.Status, r.Body, r.Replayed(), px.Logs.String())
	}
	if r := send(captured, "capture", key, webhookID); r.Status != 200 || !r.Replayed() {
		t.Errorf("PayPal's retry: %d replayed=%v, want the stored answer", r.Status, r.Replayed())
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); send(captured, "capture", key, webhookID) }()
	}
	wg.Wait()
	if n := site.Executions("capture"); n != 1 {
		t.Errorf("the event ran %d times, want 1", n)
	}
	if r := send(event("WH-58D329510W468432D-8HN650336L201105X", "DECLINED"), "capture-changed", key, webhookID); r.Status != 422 {
		t.Errorf("a changed body under the event id: %d, want 422", r.Status)
	}
	if r := send(event("WH-FORGED", "COMPLETED"), "forged", forger, webhookID); r.Status != http.StatusUnauthorized {
		t.Errorf("another key's signature: %d, want 401", r.Status)
	}
	if r := send(event("WH-OTHERHOOK", "COMPLETED"), "forged", key, "9XL90610J3647323C"); r.Status != http.StatusUnauthorized {
		t.Errorf("a delivery for another webhook: %d, want 401", r.Status)
	}
	if n := site.Executions("capture-changed") + site.Executions("forged"); n != 0 {
		t.Errorf("refused deliveries ran %d times", n)
	}
	late := event("WH-2WR32451HC0233532-67976317FL4543714", "COMPLETED")
	failing.Store(true)
	if r := send(late, "late", key, webhookID); r.Status != 500 {
		t.Errorf("the site's 500: %d", r.Status)
	}
	failing.Store(false)
	if r := send(late, "late", key, webhookID); r.Status != 200 || r.Replayed() {
		t.Errorf("PayPal's retry after a 500: %d replayed=%v, want it run", r.Status, r.Replayed())
	}
	if n := site.Executions("late"); n != 2 {
		t.Errorf("the event ran %d times, want 2 (the 500, then the 200)", n)
	}
}

// TestYandexPayThroughProxy: Yandex Pay's notifications are tokens signed
// anew for every delivery. A notification runs once and its re-signed
// retries are replayed; an order's next status, and a change under the
// same key that the key does not name, each run once; a token signed by
// another key never runs.
func TestYandexPayThroughProxy(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	forger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := key.PublicKey.Bytes()
	jwks := `{"keys":[{"kty":"EC","crv":"P-256","alg":"ES256","kid":"1-merchant-api","x":"` +
		base64.RawURLEncoding.EncodeToString(pub[1:33]) + `","y":"` + base64.RawURLEncoding.EncodeToString(pub[33:]) + `"}]}`
	jwksFile := filepath.Join(t.TempDir(), "yandex-pay.jwks")
	if err := os.WriteFile(jwksFile, []byte(jwks), 0o600); err != nil {
		t.Fatal(err)
	}
	site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"success"}`)
	})
	px := proxytest.Start(t, newStore(t), site.URL, `
senders:
  - name: yandex-pay
    preset: yandex-pay
    match: { path: /v1/webhook }
    signature: { jwks_file: `+jwksFile+` }
`)
	sign := func(signer *ecdsa.PrivateKey, payload string, iat time.Time) string {
		header := `{"alg":"ES256","exp":` + strconv.FormatInt(iat.Add(5*time.Minute).Unix(), 10) + `,"iat":` + strconv.FormatInt(iat.Unix(), 10) + `,"kid":"1-merchant-api","typ":"JWT"}`
		signed := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(payload))
		sum := sha256.Sum256([]byte(signed))
		r, s, err := ecdsa.Sign(rand.Reader, signer, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		sig := make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
		return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
	}
	send := func(token, label string) proxytest.Reply {
		return bxSend(t, http.MethodPost, px.URL+"/v1/webhook", "application/octet-stream", token, "X-Event-Id", label, "User-Agent", "YandexPay/1.0")
	}
	order := func(status, extra string) string {
		return `{"merchantId":"m-1","event":"ORDER_STATUS_UPDATED","eventTime":"2026-01-15T08:11:09+00:00","order":{"orderId":"700aa3f0","paymentStatus":"` + status + `"` + extra + `}}`
	}
	now := time.Now()
	if r := send(sign(key, order("CAPTURED", ""), now), "captured"); r.Status != 200 || r.Replayed() {
		t.Fatalf("a signed notification: %d %q replayed=%v\n%s", r.Status, r.Body, r.Replayed(), px.Logs.String())
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			send(sign(key, order("CAPTURED", ""), now.Add(time.Duration(i)*time.Second)), "captured")
		}()
	}
	wg.Wait()
	if r := send(sign(key, order("CAPTURED", ""), now.Add(time.Minute)), "captured"); r.Status != 200 || !r.Replayed() || string(r.Body) != `{"status":"success"}` {
		t.Errorf("a re-signed retry: %d %q replayed=%v, want the stored answer", r.Status, r.Body, r.Replayed())
	}
	if r := send(sign(key, order("REFUNDED", ""), now), "refunded"); r.Status != 200 || r.Replayed() {
		t.Errorf("the order's next status: %d replayed=%v", r.Status, r.Replayed())
	}
	// A change the key does not name: its own notification, and its own
	// retry is replayed.
	for range 2 {
		send(sign(key, order("CAPTURED", `,"deliveryStatus":"DELIVERED"`), now), "delivered")
	}
	for label, want := range map[string]int{"captured": 1, "refunded": 1, "delivered": 1} {
		if n := site.Executions(label); n != want {
			t.Errorf("%s ran %d times, want %d", label, n, want)
		}
	}
	if r := send(sign(forger, order("CAPTURED", `,"x":1`), now), "forged"); r.Status != http.StatusUnauthorized {
		t.Errorf("a token signed by another key: %d, want 401", r.Status)
	}
	if r := send(sign(key, order("CANCELLED", ""), now.Add(-time.Hour)), "forged"); r.Status != http.StatusUnauthorized {
		t.Errorf("an expired token: %d, want 401", r.Status)
	}
	if n := site.Executions("forged"); n != 0 {
		t.Errorf("refused tokens ran %d times", n)
	}
}
