package contract_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

// mustSender parses a one-sender config (the sender is named "s", matched
// on POST /hook) with the given extra YAML lines, indented under it.
func mustSender(t testing.TB, lines ...string) *contract.Sender {
	t.Helper()
	c, err := contract.Parse([]byte(senderYAML(lines...)), "test.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c.Senders[0]
}

func senderYAML(lines ...string) string {
	var b strings.Builder
	b.WriteString("senders:\n  - name: s\n    match: {path: /hook}\n")
	for _, l := range lines {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

// The test's own signers: written from the providers' documentation, not
// from hookonce's code, so a shared mistake cannot make both agree.
func mac(secret []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

func signStripe(secret string, ts int64, body string) string {
	t := strconv.FormatInt(ts, 10)
	return "t=" + t + ",v1=" + hex.EncodeToString(mac([]byte(secret), t, ".", body))
}

func signGitHub(secret, body string) string {
	return "sha256=" + hex.EncodeToString(mac([]byte(secret), body))
}

func signShopify(secret, body string) string {
	return base64.StdEncoding.EncodeToString(mac([]byte(secret), body))
}

func signStandard(whsec, id string, ts int64, body string) string {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(whsec, "whsec_"))
	if err != nil {
		panic(err)
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, ".", strconv.FormatInt(ts, 10), ".", body))
}

func signSlack(secret string, ts int64, body string) string {
	return "v0=" + hex.EncodeToString(mac([]byte(secret), "v0:", strconv.FormatInt(ts, 10), ":", body))
}

// nonCanonical sets the unused low bits of the last character of a padded
// base64 encoding of 32 bytes: lenient decoders read the same bytes, but
// it is not the encoding the sender made.
func nonCanonical(b64 string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	i := strings.IndexByte(alphabet, b64[42])
	return b64[:42] + string(alphabet[i|1]) + b64[43:]
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

const slackDocBody = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"

// TestPublishedVectors checks each scheme against the providers' own
// examples (GitHub, Standard Webhooks, Slack) and, where the provider
// publishes only the computation (Stripe, Shopify), against digests made by
// `openssl dgst -sha256 -hmac`, an implementation that shares no code with
// hookonce.
func TestPublishedVectors(t *testing.T) {
	tests := []struct {
		name   string
		lines  []string
		header http.Header
		body   string
		now    time.Time
	}{
		{
			name:   "github docs",
			lines:  []string{"preset: github", "signature: {secret_file: testdata/secrets/github}"},
			header: hdr("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"),
			body:   "Hello, World!",
			now:    time.Now(),
		},
		{
			name:  "standard webhooks spec",
			lines: []string{"preset: standard-webhooks", "signature: {secret_file: testdata/secrets/standard-webhooks}"},
			header: hdr("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp", "1614265330",
				"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
			body: `{"test": 2432232314}`,
			now:  time.Unix(1614265330, 0).Add(time.Minute),
		},
		{
			name:  "standard webhooks spec, among other signatures",
			lines: []string{"preset: standard-webhooks", "signature: {secret_file: testdata/secrets/standard-webhooks}"},
			header: hdr("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp", "1614265330",
				"webhook-signature", "v1a,AAAA v1,Ak3kY1VpJr2EYrjTSXxkWBP5SkFv1B0A9eFCn0XZwbQ= v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
			body: `{"test": 2432232314}`,
			now:  time.Unix(1614265330, 0).Add(-time.Minute),
		},
		{
			name:  "slack docs",
			lines: []string{"preset: slack", "signature: {secret_file: testdata/secrets/slack}"},
			header: hdr("X-Slack-Request-Timestamp", "1531420618",
				"X-Slack-Signature", "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"),
			body: slackDocBody,
			now:  time.Unix(1531420618, 0).Add(2 * time.Minute),
		},
		{
			name:   "stripe, openssl digest",
			lines:  []string{"preset: stripe", "signature: {secret_file: testdata/secrets/stripe}"},
			header: hdr("Stripe-Signature", "t=1614265330,v1=e6622bfe4613d82d4f2e6817ec61a5229f5e812a779b160c63f92330edd50412,v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39"),
			body:   `{"id":"evt_test_1","object":"event"}`,
			now:    time.Unix(1614265330, 0),
		},
		{
			name:   "shopify, openssl digest",
			lines:  []string{"preset: shopify", "signature: {secret_file: testdata/secrets/shopify}"},
			header: hdr("X-Shopify-Hmac-Sha256", "uF8gtU7hA3LjwbNXVph+/+AMbKlob9VJU6SkjE39P/0="),
			body:   `{"id":820982911946154508,"email":"jon@example.com"}`,
			now:    time.Now(),
		},
		{
			name:   "hmac-sha256 hex with prefix, openssl digest",
			lines:  []string{"key: [{body: id}]", `signature: {scheme: hmac-sha256, header: X-Signature, prefix: "sha256=", secret_file: testdata/secrets/generic}`},
			header: hdr("X-Signature", "sha256=52737a77d10923cfedf998c753b0d8b10272ff4b01d4e202b2a0315550a830d3"),
			body:   `{"id":7,"amount":100}`,
			now:    time.Now(),
		},
		{
			name:   "hmac-sha256 base64, openssl digest",
			lines:  []string{"preset: hmac-sha256", "key: [{body: id}]", `signature: {header: X-Signature, encoding: base64, secret_file: testdata/secrets/generic}`},
			header: hdr("X-Signature", "UnN6d9EJI8/t+ZjHU7DYsQJy/0sB1OICsqAxVVCoMNM="),
			body:   `{"id":7,"amount":100}`,
			now:    time.Now(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSender(t, tt.lines...)
			if !s.HasSignature() {
				t.Fatal("HasSignature = false")
			}
			if err := s.Verify(sigRequest(tt.header, []byte(tt.body)), tt.now); err != nil {
				t.Fatalf("Verify(published example) = %v, want valid", err)
			}
			if err := s.Verify(sigRequest(tt.header, []byte(tt.body+" ")), tt.now); err == nil {
				t.Fatal("Verify accepted the example with one byte appended")
			}
		})
	}
}

// scheme describes how to sign a delivery for one preset, so one table
// can run every verdict against every scheme.
type scheme struct {
	preset  string
	extra   []string                                                          // YAML lines besides the preset and secrets
	secret  string                                                            // current
	old     string                                                            // previous
	wrong   string                                                            // neither ("" = secret+"x")
	timed   bool                                                              // signs a timestamp
	sign    func(secret string, ts int64, body string) http.Header            // headers for a delivery
	garbled func(secret string, ts int64, body string) map[string]http.Header // malformed variants
}

const (
	swCurrent  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	swPrevious = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
)

var schemesUnderTest = []scheme{
	{
		preset: "stripe", secret: "whsec_current", old: "whsec_previous", timed: true,
		sign: func(secret string, ts int64, body string) http.Header {
			return hdr("Stripe-Signature", signStripe(secret, ts, body))
		},
		garbled: func(secret string, ts int64, body string) map[string]http.Header {
			good := signStripe(secret, ts, body)
			v1 := good[strings.Index(good, "v1="):]
			return map[string]http.Header{
				"no timestamp":      hdr("Stripe-Signature", v1),
				"no v1":             hdr("Stripe-Signature", "t="+strconv.FormatInt(ts, 10)+",v0="+v1[3:]),
				"short v1":          hdr("Stripe-Signature", "t="+strconv.FormatInt(ts, 10)+","+v1[:len(v1)-2]),
				"two timestamps":    hdr("Stripe-Signature", "t=1,"+good),
				"signed timestamp":  hdr("Stripe-Signature", "t=+"+good[2:]),
				"no equals":         hdr("Stripe-Signature", good+",junk"),
				"empty":             hdr("Stripe-Signature", ""),
				"header twice":      hdr("Stripe-Signature", good, "Stripe-Signature", good),
				"non-hex v1":        hdr("Stripe-Signature", "t="+strconv.FormatInt(ts, 10)+",v1="+strings.Repeat("zz", 32)),
				"hex of another ts": hdr("Stripe-Signature", "t="+strconv.FormatInt(ts+1, 10)+","+v1),
			}
		},
	},
	{
		preset: "github", secret: "gh-current", old: "gh-previous",
		sign: func(secret string, _ int64, body string) http.Header {
			return hdr("X-Hub-Signature-256", signGitHub(secret, body))
		},
		garbled: func(secret string, _ int64, body string) map[string]http.Header {
			good := signGitHub(secret, body)
			return map[string]http.Header{
				"no prefix":     hdr("X-Hub-Signature-256", good[7:]),
				"sha1 prefix":   hdr("X-Hub-Signature-256", "sha1="+good[7:47]),
				"short":         hdr("X-Hub-Signature-256", good[:len(good)-2]),
				"long":          hdr("X-Hub-Signature-256", good+"00"),
				"non-hex":       hdr("X-Hub-Signature-256", "sha256="+strings.Repeat("g", 64)),
				"sha1 header":   hdr("X-Hub-Signature", "sha1="+good[7:47]),
				"header twice":  hdr("X-Hub-Signature-256", good, "X-Hub-Signature-256", good),
				"base64 digest": hdr("X-Hub-Signature-256", "sha256="+signShopify(secret, body)),
			}
		},
	},
	{
		preset: "shopify", secret: "shpss_current", old: "shpss_previous",
		sign: func(secret string, _ int64, body string) http.Header {
			return hdr("X-Shopify-Hmac-Sha256", signShopify(secret, body))
		},
		garbled: func(secret string, _ int64, body string) map[string]http.Header {
			good := signShopify(secret, body)
			return map[string]http.Header{
				"hex digest":     hdr("X-Shopify-Hmac-Sha256", hex.EncodeToString(mac([]byte(secret), body))),
				"unpadded":       hdr("X-Shopify-Hmac-Sha256", strings.TrimRight(good, "=")),
				"url alphabet":   hdr("X-Shopify-Hmac-Sha256", base64.URLEncoding.EncodeToString(mac([]byte(secret), body))+"x"),
				"truncated":      hdr("X-Shopify-Hmac-Sha256", good[:20]),
				"16 bytes":       hdr("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(mac([]byte(secret), body)[:16])),
				"with sha256=":   hdr("X-Shopify-Hmac-Sha256", "sha256="+good),
				"non-canonical":  hdr("X-Shopify-Hmac-Sha256", nonCanonical(good)),
				"header missing": hdr("X-Other", good),
			}
		},
	},
	{
		preset: "standard-webhooks", secret: swCurrent, old: swPrevious, wrong: "whsec_dGhpcyBpcyBub3QgdGhlIHNlY3JldA==", timed: true,
		sign: func(secret string, ts int64, body string) http.Header {
			return hdr("webhook-id", "msg_1", "webhook-timestamp", strconv.FormatInt(ts, 10),
				"webhook-signature", signStandard(secret, "msg_1", ts, body))
		},
		garbled: func(secret string, ts int64, body string) map[string]http.Header {
			sig := signStandard(secret, "msg_1", ts, body)
			tsv := strconv.FormatInt(ts, 10)
			return map[string]http.Header{
				"no id":             hdr("webhook-timestamp", tsv, "webhook-signature", sig),
				"other id":          hdr("webhook-id", "msg_2", "webhook-timestamp", tsv, "webhook-signature", sig),
				"no timestamp":      hdr("webhook-id", "msg_1", "webhook-signature", sig),
				"bad timestamp":     hdr("webhook-id", "msg_1", "webhook-timestamp", tsv+"x", "webhook-signature", sig),
				"no signature":      hdr("webhook-id", "msg_1", "webhook-timestamp", tsv),
				"v2 only":           hdr("webhook-id", "msg_1", "webhook-timestamp", tsv, "webhook-signature", "v2,"+sig[3:]),
				"no comma":          hdr("webhook-id", "msg_1", "webhook-timestamp", tsv, "webhook-signature", "v1"+sig[3:]),
				"truncated":         hdr("webhook-id", "msg_1", "webhook-timestamp", tsv, "webhook-signature", sig[:20]),
				"non-canonical b64": hdr("webhook-id", "msg_1", "webhook-timestamp", tsv, "webhook-signature", "v1,"+nonCanonical(sig[3:])),
			}
		},
	},
	{
		preset: "slack", secret: "slack-current", old: "slack-previous", timed: true,
		sign: func(secret string, ts int64, body string) http.Header {
			return hdr("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10), "X-Slack-Signature", signSlack(secret, ts, body))
		},
		garbled: func(secret string, ts int64, body string) map[string]http.Header {
			sig := signSlack(secret, ts, body)
			tsv := strconv.FormatInt(ts, 10)
			return map[string]http.Header{
				"no timestamp":      hdr("X-Slack-Signature", sig),
				"no signature":      hdr("X-Slack-Request-Timestamp", tsv),
				"v1 prefix":         hdr("X-Slack-Request-Timestamp", tsv, "X-Slack-Signature", "v1="+sig[3:]),
				"leading zero ts":   hdr("X-Slack-Request-Timestamp", "0"+tsv, "X-Slack-Signature", sig),
				"fractional ts":     hdr("X-Slack-Request-Timestamp", tsv+".5", "X-Slack-Signature", sig),
				"short":             hdr("X-Slack-Request-Timestamp", tsv, "X-Slack-Signature", sig[:40]),
				"signature of ts+1": hdr("X-Slack-Request-Timestamp", strconv.FormatInt(ts+1, 10), "X-Slack-Signature", sig),
			}
		},
	},
	{
		preset: "hmac-sha256", secret: "generic-current", old: "generic-previous",
		extra: []string{"key: [{header: X-Event-Id}]"},
		sign: func(secret string, _ int64, body string) http.Header {
			return hdr("X-Signature", "sha256="+hex.EncodeToString(mac([]byte(secret), body)))
		},
		garbled: func(secret string, _ int64, body string) map[string]http.Header {
			digest := hex.EncodeToString(mac([]byte(secret), body))
			return map[string]http.Header{
				"no prefix":    hdr("X-Signature", digest),
				"other prefix": hdr("X-Signature", "sha1="+digest),
				"base64":       hdr("X-Signature", "sha256="+base64.StdEncoding.EncodeToString(mac([]byte(secret), body))),
				"odd length":   hdr("X-Signature", "sha256="+digest[1:]),
			}
		},
	},
}

// configure writes the scheme's sender with the current (and optionally the
// previous) secret in environment variables.
func (sc scheme) configure(t *testing.T, withPrevious bool) *contract.Sender {
	t.Helper()
	t.Setenv("HOOKONCE_TEST_SECRET", sc.secret)
	t.Setenv("HOOKONCE_TEST_OLD_SECRET", sc.old)
	sig := "signature: {secret_env: HOOKONCE_TEST_SECRET"
	if withPrevious {
		sig += ", previous_secret_env: HOOKONCE_TEST_OLD_SECRET"
	}
	if sc.preset == "hmac-sha256" {
		sig += `, header: X-Signature, prefix: "sha256="`
	}
	sig += "}"
	lines := append([]string{"preset: " + sc.preset, sig}, sc.extra...)
	return mustSender(t, lines...)
}

func TestVerdicts(t *testing.T) {
	now := time.Unix(1764451200, 0) // 2025-11-29T21:20:00Z
	ts := now.Unix() - 30
	body := `{"id":"evt_1","event_id":"Ev1","amount":100}`
	for _, sc := range schemesUnderTest {
		t.Run(sc.preset, func(t *testing.T) {
			wrong := sc.wrong
			if wrong == "" {
				wrong = sc.secret + "x"
			}
			s := sc.configure(t, true)
			single := sc.configure(t, false)
			type verdict struct {
				name   string
				s      *contract.Sender
				h      http.Header
				body   string
				now    time.Time
				reason string // "" = valid
			}
			cases := []verdict{
				{"valid", s, sc.sign(sc.secret, ts, body), body, now, ""},
				{"valid, one secret configured", single, sc.sign(sc.secret, ts, body), body, now, ""},
				{"rotated: signed with the previous secret", s, sc.sign(sc.old, ts, body), body, now, ""},
				{"previous secret not configured", single, sc.sign(sc.old, ts, body), body, now, contract.ReasonMismatch},
				{"tampered body", s, sc.sign(sc.secret, ts, body), strings.Replace(body, "100", "900", 1), now, contract.ReasonMismatch},
				{"empty body", s, sc.sign(sc.secret, ts, body), "", now, contract.ReasonMismatch},
				{"wrong secret", s, sc.sign(wrong, ts, body), body, now, contract.ReasonMismatch},
				{"no headers", s, http.Header{}, body, now, "no "},
			}
			if sc.timed {
				cases = append(cases,
					verdict{"stale timestamp", s, sc.sign(sc.secret, now.Unix()-301, body), body, now, contract.ReasonTolerance},
					verdict{"future timestamp", s, sc.sign(sc.secret, now.Unix()+301, body), body, now, contract.ReasonTolerance},
					verdict{"edge of tolerance", s, sc.sign(sc.secret, now.Unix()-300, body), body, now, ""},
					verdict{"stale and wrong secret", s, sc.sign(wrong, now.Unix()-3600, body), body, now, contract.ReasonTolerance},
				)
			}
			for name, h := range sc.garbled(sc.secret, ts, body) {
				cases = append(cases, verdict{"malformed: " + name, s, h, body, now, "?"})
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					err := c.s.Verify(sigRequest(c.h, []byte(c.body)), c.now)
					switch {
					case c.reason == "" && err != nil:
						t.Fatalf("Verify = %v, want valid", err)
					case c.reason == "":
						return
					case err == nil:
						t.Fatalf("Verify accepted it, want %q", c.reason)
					case c.reason != "?" && !strings.Contains(err.Error(), c.reason):
						t.Fatalf("Verify = %q, want it to say %q", err, c.reason)
					}
					var se *contract.SignatureError
					if !errors.As(err, &se) {
						t.Errorf("error %T is not a *contract.SignatureError", err)
					}
					assertNoSecrets(t, err.Error(), c.h, sc.secret, sc.old)
				})
			}
		})
	}
}

// assertNoSecrets fails when msg quotes a secret or any signature header
// value of some length.
func assertNoSecrets(t *testing.T, msg string, h http.Header, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(msg, s) {
			t.Errorf("message %q quotes a secret", msg)
		}
	}
	for _, vals := range h {
		for _, v := range vals {
			for _, piece := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '=' || r == ' ' }) {
				if len(piece) >= 16 && strings.Contains(msg, piece) {
					t.Errorf("message %q quotes a header value", msg)
				}
			}
		}
	}
}

func TestNoSignature(t *testing.T) {
	s := mustSender(t, "key: [{header: X-Event-Id}]")
	if s.HasSignature() {
		t.Fatal("HasSignature = true without a signature section")
	}
	if err := s.Verify(sigRequest(http.Header{}, []byte("x")), time.Now()); err != nil {
		t.Fatalf("Verify without a scheme = %v", err)
	}
}

func TestToleranceOverride(t *testing.T) {
	t.Setenv("HOOKONCE_TEST_SECRET", "s")
	s := mustSender(t, "preset: slack", "signature: {secret_env: HOOKONCE_TEST_SECRET, tolerance: 1h}")
	now := time.Unix(1764451200, 0)
	h := hdr("X-Slack-Request-Timestamp", strconv.FormatInt(now.Unix()-1800, 10), "X-Slack-Signature", signSlack("s", now.Unix()-1800, "b"))
	if err := s.Verify(sigRequest(h, []byte("b")), now); err != nil {
		t.Fatalf("30 minutes old with tolerance 1h: %v", err)
	}
	if err := s.Verify(sigRequest(h, []byte("b")), now.Add(time.Hour)); err == nil || !strings.Contains(err.Error(), contract.ReasonTolerance) {
		t.Fatalf("90 minutes old with tolerance 1h: %v", err)
	}
}

func TestSecretFileTrimmedAndRelativeToConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gh.secret"), []byte("\n  It's a Secret to Everybody \r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "hookonce.yaml")
	if err := os.WriteFile(cfg, []byte(senderYAML("preset: github", "signature: {secret_file: gh.secret}")), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := contract.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := hdr("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	if err := c.Senders[0].Verify(sigRequest(h, []byte("Hello, World!")), time.Now()); err != nil {
		t.Fatalf("secret file with whitespace: %v", err)
	}
}

func TestSignatureConfigErrors(t *testing.T) {
	t.Setenv("HOOKONCE_BAD_WHSEC", "whsec_!!not-base64!!")
	t.Setenv("HOOKONCE_EMPTY", "  \n")
	t.Setenv("HOOKONCE_OK", "fine-secret-value")
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("k", 70000)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{"preset without secret", []string{"preset: stripe"},
			`test.yaml:2: sender "s": field signature.secret_env: required: secret_env or secret_file`},
		{"env not set", []string{"preset: github", "signature: {secret_env: HOOKONCE_NOT_SET_ANYWHERE}"},
			`test.yaml:5: sender "s": field signature.secret_env: environment variable HOOKONCE_NOT_SET_ANYWHERE is not set`},
		{"file missing", []string{"preset: github", "signature: {secret_file: testdata/secrets/nope}"},
			`test.yaml:5: sender "s": field signature.secret_file: read secret: testdata/secrets/nope: no such file or directory`},
		{"secret file is a directory", []string{"preset: github", "signature: {secret_file: testdata/secrets}"},
			`field signature.secret_file: read secret: testdata/secrets: is a directory`},
		{"secret file too large", []string{"preset: github", "signature: {secret_file: " + big + "}"},
			`field signature.secret_file: read secret: ` + big + `: larger than 65536 bytes, not a secret`},
		{"secret empty", []string{"preset: github", "signature: {secret_env: HOOKONCE_EMPTY}"},
			`field signature.secret_env: the secret is empty`},
		{"both sources", []string{"preset: github", "signature: {secret_env: HOOKONCE_OK, secret_file: testdata/secrets/github}"},
			`field signature.secret_env: set either secret_env or secret_file, not both`},
		{"bad whsec", []string{"preset: standard-webhooks", "signature: {secret_env: HOOKONCE_BAD_WHSEC}"},
			`field signature.secret_env: not a standard-webhooks secret (whsec_ followed by base64)`},
		{"previous env not set", []string{"preset: github", "signature: {secret_env: HOOKONCE_OK, previous_secret_env: HOOKONCE_GONE}"},
			`field signature.previous_secret_env: environment variable HOOKONCE_GONE is not set`},
		{"unknown scheme", []string{"key: [{header: X}]", "signature: {scheme: md5, secret_env: HOOKONCE_OK}"},
			`field signature.scheme: unknown scheme "md5"`},
		{"encoding on a fixed scheme", []string{"preset: github", "signature: {secret_env: HOOKONCE_OK, encoding: base64}"},
			`field signature.encoding: only applies to scheme hmac-sha256`},
		{"tolerance on github", []string{"preset: github", "signature: {secret_env: HOOKONCE_OK, tolerance: 5m}"},
			`field signature.tolerance: scheme github signs no timestamp`},
		{"tolerance too short", []string{"preset: stripe", "signature: {secret_env: HOOKONCE_OK, tolerance: 10ms}"},
			`field signature.tolerance: 10ms is too short`},
		{"generic without header", []string{"key: [{header: X}]", "signature: {scheme: hmac-sha256, secret_env: HOOKONCE_OK}"},
			`field signature.header: required for scheme hmac-sha256`},
		{"generic bad encoding", []string{"key: [{header: X}]", "signature: {scheme: hmac-sha256, header: X-Sig, encoding: base32, secret_env: HOOKONCE_OK}"},
			`field signature.encoding: "base32": want hex or base64`},
		{"generic preset without key", []string{"preset: hmac-sha256", "signature: {header: X-Sig, secret_env: HOOKONCE_OK}"},
			`field key: required`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := contract.Parse([]byte(senderYAML(tt.lines...)), "test.yaml")
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err =\n%v\nwant it to contain\n%s", err, tt.want)
			}
			for _, secret := range []string{"!!not-base64!!", "fine-secret-value", "It's a Secret"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error quotes a secret: %v", err)
				}
			}
		})
	}
}

func TestPresetsFillKeyAndWindow(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	tests := []struct {
		preset string
		window time.Duration
		header http.Header
		body   string
		want   string
	}{
		{"stripe", 72 * time.Hour, nil, `{"id":"evt_1","object":"event"}`, "evt_1"},
		{"stripe", 72 * time.Hour, nil, `{"id":"evt_1","object":"event","api_version":null}`, "evt_1"},
		{"stripe", 72 * time.Hour, nil, `{"id":"evt_1","object":"event","api_version":"2024-06-20"}`, "evt_1:2024-06-20"},
		{"github", 72 * time.Hour, hdr("X-GitHub-Hook-ID", "292430182", "X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"), `{}`, "292430182:72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		{"shopify", 4 * time.Hour, hdr("X-Shopify-Topic", "orders/paid", "X-Shopify-Event-Id", "ev-9", "X-Shopify-Webhook-Id", "wh-1"), `{}`, "orders/paid:ev-9"},
		{"shopify", 4 * time.Hour, hdr("X-Shopify-Topic", "orders/paid", "X-Shopify-Webhook-Id", "wh-1"), `{}`, "orders/paid:wh-1"},
		{"standard-webhooks", 75 * time.Hour, hdr("webhook-id", "msg_1"), `{}`, "msg_1"},
		{"slack", 10 * time.Minute, nil, `{"type":"event_callback","event_id":"Ev08"}`, "Ev08"},
	}
	for _, tt := range tests {
		t.Run(tt.preset+" "+tt.want, func(t *testing.T) {
			s := mustSender(t, "preset: "+tt.preset, "signature: {secret_env: HOOKONCE_OK}")
			if s.Preset != tt.preset || s.RetryWindow != tt.window {
				t.Errorf("preset %q window %s, want %q %s", s.Preset, s.RetryWindow, tt.preset, tt.window)
			}
			r, _ := http.NewRequest("POST", "/hook", strings.NewReader(tt.body))
			for k, v := range tt.header {
				r.Header[k] = v
			}
			got, err := s.Key(keyRequest(r, []byte(tt.body)))
			if err != nil || got != tt.want {
				t.Fatalf("Key = %q, %v; want %q", got, err, tt.want)
			}
			if !slices.Equal(s.Methods, []string{"POST"}) || s.Path != "/hook" {
				t.Errorf("preset changed the match: %s %s", s.Methods, s.Path)
			}
		})
	}
}

func TestSenderOverridesPreset(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "s3cret")
	s := mustSender(t, "preset: github", "key: [{body: delivery.id}]", "signature: {secret_env: HOOKONCE_OK, header: X-Proxy-Signature}")
	r, _ := http.NewRequest("POST", "/hook", nil)
	r.Header.Set("X-GitHub-Delivery", "from-header")
	got, err := s.Key(keyRequest(r, []byte(`{"delivery":{"id":"from-body"}}`)))
	if err != nil || got != "from-body" {
		t.Fatalf("Key = %q, %v; want the sender's own key", got, err)
	}
	body := "payload"
	if err := s.Verify(sigRequest(hdr("X-Proxy-Signature", signGitHub("s3cret", body)), []byte(body)), time.Now()); err != nil {
		t.Fatalf("overridden header: %v", err)
	}
	if err := s.Verify(sigRequest(hdr("X-Hub-Signature-256", signGitHub("s3cret", body)), []byte(body)), time.Now()); err == nil {
		t.Fatal("the preset's header is still accepted after the sender replaced it")
	}
}

func TestRetryWindowWarnings(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "s3cret")
	yaml := "defaults: {ttl: 24h}\nsenders:\n" +
		"  - {name: stripe, preset: stripe, match: {path: /s}, signature: {secret_env: HOOKONCE_OK}}\n" +
		"  - {name: shopify, preset: shopify, match: {path: /sh}, signature: {secret_env: HOOKONCE_OK}}\n" +
		"  - {name: gh, preset: github, ttl: 100h, match: {path: /g}, signature: {secret_env: HOOKONCE_OK}}\n"
	c, err := contract.Parse([]byte(yaml), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`w.yaml: sender "stripe": ttl 24h0m0s is shorter than the stripe retry window 72h0m0s: a late retry would be processed again`}
	if fmt.Sprint(c.Warnings) != fmt.Sprint(want) {
		t.Fatalf("warnings = %q\nwant %q", c.Warnings, want)
	}
}
