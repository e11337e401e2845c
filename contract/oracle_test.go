package contract_test

// The providers' own Go code as test oracles: for generated payloads,
// secrets, timestamps and tampered variants, hookonce's verdict must equal
// theirs. These modules are imported from this test file only; the binary
// does not link them.

import (
	"encoding/base64"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v75/github"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v84/webhook"

	"github.com/hookonce/hookonce/contract"
)

const oracleRounds = 200

func randText(r *rand.Rand, n int) string {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[r.IntN(len(chars))]
	}
	return string(b)
}

func randBody(r *rand.Rand) []byte {
	switch r.IntN(3) {
	case 0:
		return []byte(`{"id":"evt_` + randText(r, 12) + `","object":"event","amount":` + strconv.Itoa(r.IntN(1e6)) + `}`)
	case 1:
		b := make([]byte, r.IntN(200))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	default:
		return []byte("a=" + randText(r, r.IntN(40)) + "&b=%2F\r\n")
	}
}

// flip changes one byte so the result differs from s.
func flip(r *rand.Rand, s []byte) []byte {
	out := append([]byte(nil), s...)
	if len(out) == 0 {
		return []byte("x")
	}
	i := r.IntN(len(out))
	out[i] ^= byte(1 + r.IntN(255))
	return out
}

func agree(t *testing.T, what string, ours error, theirs error) {
	t.Helper()
	if (ours == nil) != (theirs == nil) {
		t.Errorf("%s: hookonce says %v, the provider's library says %v", what, ours, theirs)
	}
}

func TestOracleStripe(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	accepted := 0
	for i := range oracleRounds {
		secret := "whsec_" + randText(r, 24)
		t.Setenv("HOOKONCE_ORACLE", secret)
		s := mustSender(t, "preset: stripe", "signature: {secret_env: HOOKONCE_ORACLE}")
		body := randBody(r)
		now := time.Now()
		// stripe-go rejects only the past; keep clear of the 5m edge.
		age := []time.Duration{0, 10 * time.Second, 4 * time.Minute, 6 * time.Minute, time.Hour}[r.IntN(5)]
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
			Payload: body, Secret: secret, Timestamp: now.Add(-age),
		})
		header := signed.Header
		payload := body
		switch i % 6 {
		case 1:
			payload = flip(r, body)
		case 2:
			header = strings.Replace(header, "v1=", "v1=00", 1)
		case 3:
			header = header + ",v1=" + strings.Repeat("ab", 32)
		case 4:
			header = "v1=" + strings.Repeat("cd", 32) + "," + header
		case 5:
			signed = webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
				Payload: body, Secret: secret + "x", Timestamp: now.Add(-age),
			})
			header = signed.Header
		}
		ours := s.Verify(sigRequest(hdr("Stripe-Signature", header), payload), now)
		theirs := webhook.ValidatePayloadWithTolerance(payload, header, secret, contract.DefaultTolerance)
		agree(t, "round "+strconv.Itoa(i), ours, theirs)
		if ours == nil {
			accepted++
		}
	}
	if accepted == 0 || accepted == oracleRounds {
		t.Fatalf("accepted %d of %d: the generator does not exercise both verdicts", accepted, oracleRounds)
	}
}

func TestOracleStandardWebhooks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	accepted := 0
	for i := range oracleRounds {
		key := make([]byte, 24)
		for j := range key {
			key[j] = byte(r.IntN(256))
		}
		secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
		t.Setenv("HOOKONCE_ORACLE", secret)
		s := mustSender(t, "preset: standard-webhooks", "signature: {secret_env: HOOKONCE_ORACLE}")
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		body := randBody(r)
		now := time.Now()
		skew := []time.Duration{0, -10 * time.Second, 4 * time.Minute, -4 * time.Minute, 6 * time.Minute, -6 * time.Minute, -time.Hour}[r.IntN(7)]
		ts := now.Add(skew)
		id := "msg_" + randText(r, 20)
		sig, err := wh.Sign(id, ts, body)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
		h.Set("webhook-signature", sig)
		payload := body
		switch i % 7 {
		case 1:
			payload = flip(r, body)
		case 2:
			h.Set("webhook-id", id+"x")
		case 3:
			h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(key[:32%len(key)])+" "+sig)
		case 4:
			h.Set("webhook-signature", "v2,"+strings.TrimPrefix(sig, "v1,"))
		case 5:
			h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix()+1, 10))
		case 6:
			other, _ := standardwebhooks.NewWebhook("whsec_" + base64.StdEncoding.EncodeToString(flip(r, key)))
			bad, _ := other.Sign(id, ts, body)
			h.Set("webhook-signature", bad)
		}
		ours := s.Verify(sigRequest(h, payload), now)
		theirs := wh.Verify(payload, h)
		agree(t, "round "+strconv.Itoa(i), ours, theirs)
		if ours == nil {
			accepted++
		}
	}
	if accepted == 0 || accepted == oracleRounds {
		t.Fatalf("accepted %d of %d: the generator does not exercise both verdicts", accepted, oracleRounds)
	}
}

func TestOracleGitHub(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	accepted := 0
	for i := range oracleRounds {
		secret := randText(r, 1+r.IntN(40))
		t.Setenv("HOOKONCE_ORACLE", secret)
		s := mustSender(t, "preset: github", "signature: {secret_env: HOOKONCE_ORACLE}")
		body := randBody(r)
		sig := signGitHub(secret, string(body))
		payload := body
		switch i % 6 {
		case 1:
			payload = flip(r, body)
		case 2:
			sig = signGitHub(secret+"x", string(body))
		case 3:
			sig = "sha256=" + strings.ToUpper(strings.TrimPrefix(sig, "sha256="))
		case 4:
			sig = sig[:len(sig)-2]
		case 5:
			sig = "sha256=" + strings.Repeat("0", 64)
		}
		ours := s.Verify(sigRequest(hdr("X-Hub-Signature-256", sig), payload), time.Now())
		theirs := github.ValidateSignature(sig, payload, []byte(secret))
		agree(t, "round "+strconv.Itoa(i), ours, theirs)
		if ours == nil {
			accepted++
		}
	}
	if accepted == 0 || accepted == oracleRounds {
		t.Fatalf("accepted %d of %d: the generator does not exercise both verdicts", accepted, oracleRounds)
	}
}
