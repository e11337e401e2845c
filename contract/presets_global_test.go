package contract_test

import (
	"encoding/hex"
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
