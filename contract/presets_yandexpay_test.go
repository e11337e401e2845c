package contract_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

// yandexKeys is a self-made stand-in for Yandex Pay's published keys: a
// P-256 key and the JWKS that lists it under kid.
type yandexKeys struct {
	key  *ecdsa.PrivateKey
	kid  string
	jwks string // the file
}

func newYandexKeys(t *testing.T, kid string) yandexKeys {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	yk := yandexKeys{key: k, kid: kid, jwks: filepath.Join(t.TempDir(), "yandex-pay.jwks")}
	writeJWKS(t, yk.jwks, yk)
	return yk
}

func (k yandexKeys) jwk() map[string]string {
	raw, _ := k.key.PublicKey.Bytes()
	return map[string]string{"kty": "EC", "crv": "P-256", "alg": "ES256", "kid": k.kid,
		"x": base64.RawURLEncoding.EncodeToString(raw[1:33]), "y": base64.RawURLEncoding.EncodeToString(raw[33:])}
}

func writeJWKS(t testing.TB, path string, keys ...yandexKeys) {
	t.Helper()
	set := map[string]any{"keys": []map[string]string{}}
	for _, k := range keys {
		set["keys"] = append(set["keys"].([]map[string]string), k.jwk())
	}
	b, _ := json.Marshal(set)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// token is a Yandex Pay notification: the header as Yandex documents it
// (alg, kid, iat, exp, typ), the payload, ES256 r||s, each base64url.
func (k yandexKeys) token(t testing.TB, payload string, iat time.Time, alg string) string {
	t.Helper()
	header := `{"alg":"` + alg + `","exp":` + strconv.FormatInt(iat.Add(5*time.Minute).Unix(), 10) + `,"iat":` +
		strconv.FormatInt(iat.Unix(), 10) + `,"kid":"` + k.kid + `","typ":"JWT"}`
	signed := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(payload))
	sum := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, k.key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func yandexReq(t *testing.T, token string) *contract.Request {
	return delivery(t, "POST", "/v1/webhook", "application/octet-stream", token, "", "User-Agent", "YandexPay/1.0")
}

func yandexOrder(order, status string) string {
	return `{"merchantId":"5f5e7c1f-0000-4000-8000-000000000001","event":"ORDER_STATUS_UPDATED","eventTime":"2026-01-15T08:11:09.359370+00:00","order":{"orderId":"` +
		order + `","paymentStatus":"` + status + `"}}`
}

func yandexOperation(order, op, typ, status string) string {
	return `{"merchantId":"5f5e7c1f-0000-4000-8000-000000000001","event":"OPERATION_STATUS_UPDATED","eventTime":"2026-01-15T09:00:00+00:00","order":{"orderId":"` +
		order + `"},"operation":{"operationId":"` + op + `","externalOperationId":"ext-` + op + `","operationType":"` + typ + `","status":"` + status + `"}}`
}

// TestYandexPayPreset: every notification Yandex Pay documents gets its
// own key (an order's statuses, each operation and its outcome); a retry
// (a token signed anew, a later iat and exp) keeps the key and the hash;
// a payload changed under one key hashes otherwise; a token signed by
// another key, tampered, expired, of another alg or another kid is
// refused.
func TestYandexPayPreset(t *testing.T) {
	yk := newYandexKeys(t, "1-merchant-api")
	s := mustSender(t, "preset: yandex-pay", "signature: {jwks_file: "+yk.jwks+"}")
	now := time.Now()
	seen := map[string]string{}
	for _, tt := range []struct{ what, payload, key string }{
		{"order captured", yandexOrder("700aa3f0", "CAPTURED"), "ORDER_STATUS_UPDATED:order.orderId=700aa3f0:CAPTURED"},
		{"order partly refunded", yandexOrder("700aa3f0", "PARTIALLY_REFUNDED"), "ORDER_STATUS_UPDATED:order.orderId=700aa3f0:PARTIALLY_REFUNDED"},
		{"another order captured", yandexOrder("81bb", "CAPTURED"), "ORDER_STATUS_UPDATED:order.orderId=81bb:CAPTURED"},
		{"a refund pending", yandexOperation("700aa3f0", "op-1", "REFUND", "PENDING"), "OPERATION_STATUS_UPDATED:order.orderId=700aa3f0::op-1:PENDING"},
		{"the refund succeeded", yandexOperation("700aa3f0", "op-1", "REFUND", "SUCCESS"), "OPERATION_STATUS_UPDATED:order.orderId=700aa3f0::op-1:SUCCESS"},
		{"a second refund of the order", yandexOperation("700aa3f0", "op-2", "REFUND", "SUCCESS"), "OPERATION_STATUS_UPDATED:order.orderId=700aa3f0::op-2:SUCCESS"},
		{"an operation without its order", `{"event":"OPERATION_STATUS_UPDATED","operation":{"operationId":"op-3","status":"FAIL"}}`, "OPERATION_STATUS_UPDATED:operation.operationId=op-3::op-3:FAIL"},
	} {
		req := yandexReq(t, yk.token(t, tt.payload, now, "ES256"))
		if err := s.Verify(req, now); err != nil {
			t.Errorf("%s: signature: %v", tt.what, err)
		}
		key, err := s.Key(req)
		if err != nil || key != tt.key {
			t.Errorf("%s: key %q %v, want %q", tt.what, key, err, tt.key)
		}
		if other, dup := seen[key]; dup {
			t.Errorf("%s and %s share a key", other, tt.what)
		}
		seen[key] = tt.what
		retry := yandexReq(t, yk.token(t, tt.payload, now.Add(3*time.Minute), "ES256"))
		if err := s.Verify(retry, now.Add(3*time.Minute)); err != nil {
			t.Errorf("%s: the retry's token: %v", tt.what, err)
		}
		k2, _ := s.Key(retry)
		h1, _, e1 := s.RequestHash(req)
		h2, _, e2 := s.RequestHash(retry)
		if k2 != key || h1 != h2 || e1 != nil || e2 != nil {
			t.Errorf("%s: a retry reads key %q hash %s (%v), the first %q %s (%v)", tt.what, k2, h2, e2, key, h1, e1)
		}
	}
	// A payload with a repeated key is read as PHP's json_decode reads
	// it, the last one winning (trap 20 in ARCHITECTURE.md).
	dup := yk.token(t, `{"event":"ORDER_STATUS_UPDATED","order":{"orderId":"first","orderId":"last","paymentStatus":"CAPTURED"}}`, now, "ES256")
	if key, err := s.Key(yandexReq(t, dup)); err != nil || key != "ORDER_STATUS_UPDATED:order.orderId=last:CAPTURED" {
		t.Errorf("a repeated orderId: key %q %v, want the last one", key, err)
	}
	// A change the key does not name (here a delivery status) hashes
	// otherwise, and new_event makes it its own notification.
	a, _, _ := s.RequestHash(yandexReq(t, yk.token(t, yandexOrder("700aa3f0", "CAPTURED"), now, "ES256")))
	b, _, _ := s.RequestHash(yandexReq(t, yk.token(t, strings.Replace(yandexOrder("700aa3f0", "CAPTURED"), `"CAPTURED"}`, `"CAPTURED","deliveryStatus":"DELIVERED"}`, 1), now, "ES256")))
	if a == b || s.ChangedPayload != contract.ChangedNewEvent {
		t.Errorf("a changed payload: hashes %s %s, changed_payload %s; want two hashes and new_event", a, b, s.ChangedPayload)
	}

	other := newYandexKeys(t, "1-merchant-api")
	rotated := newYandexKeys(t, "2-merchant-api")
	good := yk.token(t, yandexOrder("700aa3f0", "CAPTURED"), now, "ES256")
	parts := strings.Split(good, ".")
	forgedPayload := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(yandexOrder("700aa3f0", "REFUNDED"))) + "." + parts[2]
	for _, tt := range []struct{ what, token, want string }{
		{"another key, same kid", other.token(t, yandexOrder("1", "CAPTURED"), now, "ES256"), contract.ReasonMismatch},
		{"a kid the file lacks", rotated.token(t, yandexOrder("1", "CAPTURED"), now, "ES256"), "kid 2-merchant-api"},
		{"the payload changed", forgedPayload, contract.ReasonMismatch},
		{"expired", yk.token(t, yandexOrder("1", "CAPTURED"), now.Add(-10*time.Minute), "ES256"), "token exp"},
		{"issued in the future", yk.token(t, yandexOrder("1", "CAPTURED"), now.Add(10*time.Minute), "ES256"), "token iat"},
		{"alg none", yk.token(t, yandexOrder("1", "CAPTURED"), now, "none"), "want ES256"},
		{"alg HS256", yk.token(t, yandexOrder("1", "CAPTURED"), now, "HS256"), "want ES256"},
		{"not a token", yandexOrder("1", "CAPTURED"), "malformed token"},
		{"two parts", parts[0] + "." + parts[1], "malformed token"},
		{"a short signature", parts[0] + "." + parts[1] + "." + parts[2][:40], "64 bytes"},
	} {
		err := s.Verify(yandexReq(t, tt.token), now)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.what, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), parts[2][:16]) {
			t.Errorf("%s: the reason quotes the signature: %v", tt.what, err)
		}
	}
	// Both keys in the file during Yandex's rotation: both verify.
	both := filepath.Join(t.TempDir(), "both.jwks")
	writeJWKS(t, both, yk, rotated)
	sb := mustSender(t, "preset: yandex-pay", "signature: {jwks_file: "+both+"}")
	for _, k := range []yandexKeys{yk, rotated} {
		if err := sb.Verify(yandexReq(t, k.token(t, yandexOrder("1", "CAPTURED"), now, "ES256")), now); err != nil {
			t.Errorf("kid %s in a two-key file: %v", k.kid, err)
		}
	}
	for status, want := range map[int]bool{200: true, 204: true, 400: false, 404: false, 500: false} {
		if ok, _ := s.Succeeded(yandexReq(t, good), status, nil); ok != want {
			t.Errorf("status %d: success %v, want %v", status, ok, want)
		}
	}
}

// TestYandexPayNodeSigner: a token signed by Node's crypto (ES256 in the
// JOSE r||s form, an implementation that shares nothing with Go's)
// passes, and the same token with one byte of its payload changed fails.
func TestYandexPayNodeSigner(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the Go-signed tokens of TestYandexPayPreset stand")
	}
	yk := newYandexKeys(t, "1-merchant-api")
	der, err := x509MarshalEC(yk.key)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	header := `{"alg":"ES256","exp":` + strconv.FormatInt(now.Add(5*time.Minute).Unix(), 10) + `,"iat":` + strconv.FormatInt(now.Unix(), 10) + `,"kid":"1-merchant-api","typ":"JWT"}`
	signed := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(yandexOrder("n1", "CAPTURED")))
	script := `const c=require('crypto');const k=c.createPrivateKey({key:Buffer.from(process.argv[1],'base64'),format:'der',type:'sec1'});` +
		`process.stdout.write(c.sign('sha256',Buffer.from(process.argv[2]),{key:k,dsaEncoding:'ieee-p1363'}).toString('base64url'))`
	out, err := exec.Command("node", "-e", script, base64.StdEncoding.EncodeToString(der), signed).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	s := mustSender(t, "preset: yandex-pay", "signature: {jwks_file: "+yk.jwks+"}")
	if err := s.Verify(yandexReq(t, signed+"."+string(out)), now); err != nil {
		t.Errorf("Node's ES256 token: %v", err)
	}
	tampered := strings.Replace(signed, signed[len(signed)-4:], "AAAA", 1)
	if err := s.Verify(yandexReq(t, tampered+"."+string(out)), now); err == nil {
		t.Error("a tampered payload under Node's signature passed")
	}
}

// TestYandexPayConfig: the JWKS is required and checked when the file is
// loaded.
func TestYandexPayConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct{ sig, want string }{
		{"{}", "signature.jwks_file: required"},
		{"{jwks_file: " + filepath.Join(dir, "none") + "}", "read keys"},
		{"{jwks_file: " + write("bad.json", "{") + "}", "not a JWKS"},
		{"{jwks_file: " + write("rsa.json", `{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`) + "}", "no ES256 key"},
		{"{jwks_file: " + write("short.json", `{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}`) + "}", "32 bytes"},
		{"{jwks_file: " + write("off.json", `{"keys":[{"kty":"EC","crv":"P-256","x":"`+strings.Repeat("A", 43)+`","y":"`+strings.Repeat("A", 43)+`"}]}`) + "}", "not a P-256 point"},
		{"{scheme: stripe, secret_env: HOME, jwks_file: x}", "jwks_file: does not apply"},
	} {
		_, err := contract.Parse([]byte(senderYAML("preset: yandex-pay", "signature: "+tt.sig)), "x.yaml")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.sig, err, tt.want)
		}
	}
}

func x509MarshalEC(k *ecdsa.PrivateKey) ([]byte, error) { return x509.MarshalECPrivateKey(k) }

// FuzzYandexPayToken: whatever body arrives, the token check neither
// panics nor accepts a header or payload the pinned key did not sign, and
// reading key parts from it never panics.
func FuzzYandexPayToken(f *testing.F) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	yk := yandexKeys{key: k, kid: "1-merchant-api", jwks: filepath.Join(f.TempDir(), "k.jwks")}
	writeJWKS(f, yk.jwks, yk)
	s := mustSender(f, "preset: yandex-pay", "signature: {jwks_file: "+yk.jwks+"}")
	now := time.Now()
	good := yk.token(f, yandexOrder("o1", "CAPTURED"), now, "ES256")
	signed := good[:strings.LastIndexByte(good, '.')]
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add("a.b.c")
	f.Add("..")
	f.Add(strings.Repeat("e", 200) + "." + strings.Repeat("f", 200) + ".")
	f.Fuzz(func(t *testing.T, body string) {
		req := delivery(t, "POST", "/v1/webhook", "application/octet-stream", body, "")
		err := s.Verify(req, now)
		// ECDSA signatures are malleable (s and n-s both hold), so another
		// signature may pass; the signed header and payload may not change.
		if b := strings.TrimSpace(body); err == nil && !strings.HasPrefix(b, signed+".") {
			t.Fatalf("accepted a body the key did not sign: %q", body)
		}
		_, _ = s.Key(req)
		_, _, _ = s.RequestHash(req)
	})
}
