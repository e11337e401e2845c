package contract_test

// The generic schemes (digest, hmac, token, basic, source-address) on
// their own; presets_bitrix_test.go checks the presets built on them.

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

func TestBasicScheme(t *testing.T) {
	t.Setenv("BASIC", "shop:pa:ss")
	s := mustSender(t, "key: [{form: id}]", "signature: {scheme: basic, secret_env: BASIC}")
	for _, tt := range []struct {
		auth string
		want string
	}{
		{"Basic c2hvcDpwYTpzcw==", ""},
		{"basic c2hvcDpwYTpzcw==", ""},
		{"Basic c2hvcDpwYTpzcA==", contract.ReasonMismatch},
		{"Bearer c2hvcDpwYTpzcw==", "malformed Authorization header: want Basic"},
		{"Basic !!", "malformed Authorization header"},
		{"", "no Authorization header"},
	} {
		var kv []string
		if tt.auth != "" {
			kv = []string{"Authorization", tt.auth}
		}
		err := s.Verify(delivery(t, "POST", "/hook", formType, "id=1", "", kv...), time.Now())
		if (tt.want == "" && err != nil) || (tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want))) {
			t.Errorf("%q: Verify = %v, want %q", tt.auth, err, tt.want)
		}
	}
}

// TestGenericMessageShapes covers the message builder on its own: parts
// with literals, headers and JSON values, field filters and formats. The
// expected messages are written out by hand.
func TestGenericMessageShapes(t *testing.T) {
	t.Setenv("K", "k3y")
	hexSum := func(msg string) string { s := sha256.Sum256([]byte(msg)); return hex.EncodeToString(s[:]) }
	b64MAC := func(msg string) string { return base64.StdEncoding.EncodeToString(mac([]byte("k3y"), msg)) }
	tests := []struct {
		name string
		sig  string
		req  func(t *testing.T, sig string) *contract.Request
		sign func(string) string
		msg  string
	}{
		{"parts with a literal, a header and a JSON number",
			`{scheme: hmac, message: {parts: ["v1", "{header.x-ts}", "{body.order.total}"], join: "."}, from: [{header: X-Sig}], encoding: base64, secret_env: K}`,
			func(t *testing.T, sig string) *contract.Request {
				return delivery(t, "POST", "/hook", "application/json", `{"order":{"total":10.50}}`, "", "X-Ts", "1700000000", "X-Sig", sig)
			}, b64MAC, "v1.1700000000.10.5"},
		{"query fields with a prefix filter and a format with braces",
			`{scheme: digest, message: {parts: ["{secret}"], fields: {source: query, include_prefix: p_, format: "{{{k}}}{v}"}, join: "|"}, from: [{query: sig}], secret_env: K}`,
			func(t *testing.T, sig string) *contract.Request {
				return delivery(t, "GET", "/hook?p_b=2&p_a=1&P_c=3&other=x&sig="+sig, "", "", "")
			}, hexSum, "k3y|{p_a}1|{p_b}2"},
		{"an empty field list adds nothing, not a join",
			`{scheme: digest, message: {parts: ["{query.a}", "{secret}"], fields: {source: query, include_prefix: Shp_, ignore_prefix_case: true}, join: ":"}, from: [{query: sig}], secret_env: K}`,
			func(t *testing.T, sig string) *contract.Request {
				return delivery(t, "GET", "/hook?a=1&sig="+sig, "", "", "")
			}, hexSum, "1:k3y"},
		{"values kept as sent: spaces, plus signs and an empty value",
			`{scheme: digest, message: {fields: {source: form, exclude: [sig], add: {zz: "{secret}"}}, join: "&"}, from: [{form: sig}], secret_env: K}`,
			func(t *testing.T, sig string) *contract.Request {
				return delivery(t, "POST", "/hook", formType, "b=+x+&a=%2B&c=&sig="+sig, "")
			}, hexSum, "a=+&b= x &c=&zz=k3y"},
		{"the raw body",
			`{scheme: hmac, message: {body: true}, from: [{header: X-Sig}], encoding: base64, secret_env: K}`,
			func(t *testing.T, sig string) *contract.Request {
				return delivery(t, "POST", "/hook", formType, "a=%20b", "", "X-Sig", sig)
			}, b64MAC, "a=%20b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSender(t, "key: [{query: x}]", "signature: "+tt.sig)
			if err := s.Verify(tt.req(t, tt.sign(tt.msg)), time.Now()); err != nil {
				t.Fatalf("signed %q: %v", tt.msg, err)
			}
			if err := s.Verify(tt.req(t, tt.sign(tt.msg+"x")), time.Now()); err == nil {
				t.Fatalf("accepted a signature over another message")
			}
		})
	}
}

// TestGenericConfigErrors: every problem of a signature section is
// reported at once, each with its line and field, none quoting a secret.
func TestGenericConfigErrors(t *testing.T) {
	t.Setenv("HOOKONCE_OK", "fine-secret-value")
	t.Setenv("NO_COLON", "no-colon-secret")
	tests := []struct {
		name string
		sig  []string // YAML lines under signature:
		want []string
	}{
		{"digest without the secret, hmac with it, unknown algorithm and encoding",
			[]string{"scheme: digest", "algorithm: md4", "encoding: hex-mixed", "message: {parts: ['{form.a}']}", "from: [{form: s}]", "secret_env: HOOKONCE_OK"},
			[]string{
				`test.yaml:7: sender "s": field signature.algorithm: "md4": want one of md5, sha1, sha256, sha512`,
				`test.yaml:8: sender "s": field signature.encoding: "hex-mixed": want hex, hex-lower, hex-upper or base64`,
				`test.yaml:9: sender "s": field signature.message: a digest must hold {secret}`,
			}},
		{"hmac with the secret in its message",
			[]string{"scheme: hmac", "message: {parts: ['{secret}']}", "from: [{header: X-S}]", "secret_env: HOOKONCE_OK"},
			[]string{`field signature.message: {secret} is the HMAC key`}},
		{"message parts and fields malformed",
			[]string{"scheme: hmac", "message: {parts: ['{nope.x}', 'a}'], fields: {source: cookie, format: '{k}', ignore_prefix_case: true}}", "from: [{header: X-S}, {header: X-T, form: t}]", "secret_env: HOOKONCE_OK"},
			[]string{
				`field signature.message.parts[0]: {nope.x}: want {form.NAME}, {query.NAME}, {request.NAME}, {header.NAME} or {body.PATH}, or {secret}`,
				`field signature.message.parts[1]: unopened }`,
				`field signature.message.fields.source: "cookie": want form, query, request or body`,
				`field signature.message.fields.ignore_prefix_case: only applies with include_prefix`,
				`field signature.message.fields.format: "{k}": must hold {v}`,
				`field signature.from[1]: set exactly one of header, body, query, form or request`,
			}},
		{"an unknown field is refused by the decoder",
			[]string{"scheme: hmac", "message: {body: true, salt: x}", "from: [{cookie: x}]", "secret_env: HOOKONCE_OK"},
			[]string{`test.yaml:7: sender "s": field signature.message.salt: unknown setting "salt"`, `test.yaml:8: sender "s": field signature.from[0].cookie: unknown setting "cookie"`}},
		{"the signature field among the signed ones",
			[]string{"scheme: hmac", "message: {fields: {source: request}}", "from: [{form: checksum}]", "secret_env: HOOKONCE_OK"},
			[]string{`field signature.message.fields.exclude: the signature's own form field checksum would be among the signed fields: exclude it`}},
		{"body with parts, no from",
			[]string{"scheme: hmac", "message: {body: true, parts: [a]}", "secret_env: HOOKONCE_OK"},
			[]string{`field signature.message.body: the raw body is the whole message`, `field signature.from: required for scheme hmac`}},
		{"no message, generic fields on a fixed scheme",
			[]string{"scheme: digest", "from: [{form: s}]", "secret_env: HOOKONCE_OK"},
			[]string{`field signature.message: required for scheme digest`}},
		{"fields of another scheme",
			[]string{"scheme: github", "algorithm: md5", "from: [{form: s}]", "secret_env: HOOKONCE_OK"},
			[]string{`field signature.algorithm: does not apply to scheme github`, `field signature.from: does not apply to scheme github`}},
		{"an allowlist beside a signature, with a bad network",
			[]string{"scheme: github", "allow: [10.0.0.0/8, not-an-ip]", "secret_env: HOOKONCE_OK"},
			[]string{`field signature.allow[1]: "not-an-ip": want an IP address or a CIDR`}},
		{"an empty allowlist beside a signature",
			[]string{"scheme: hmac", "allow: []", "message: {body: true}", "from: [{header: X-Sig}]", "secret_env: HOOKONCE_OK"},
			[]string{`field signature.allow: lists no address`}},
		{"header, prefix and tolerance on a generic scheme",
			[]string{"scheme: token", "header: X-Token", "prefix: 'x='", "tolerance: 5m", "encoding: hex", "from: [{header: X-T}]", "secret_env: HOOKONCE_OK"},
			[]string{`field signature.header: does not apply to scheme token`, `field signature.prefix: only applies to scheme hmac-sha256`,
				`field signature.tolerance: scheme token signs no timestamp`, `field signature.encoding: does not apply to scheme token`}},
		{"source-address with a secret and a bad network",
			[]string{"scheme: source-address", "allow: [10.0.0.0/8, not-an-ip, '::1']", "secret_env: HOOKONCE_OK"},
			[]string{`field signature.secret_env: scheme source-address takes no secret`, `test.yaml:7: sender "s": field signature.allow[1]: "not-an-ip": want an IP address or a CIDR`}},
		{"source-address without a list",
			[]string{"scheme: source-address"},
			[]string{`field signature.allow: required for scheme source-address`}},
		{"basic with a secret that is not user:password",
			[]string{"scheme: basic", "secret_env: NO_COLON"},
			[]string{`field signature.secret_env: scheme basic wants the secret as user:password`}},
		{"token without from or secret",
			[]string{"scheme: token"},
			[]string{`field signature.from: required for scheme token`, `field signature.secret_env: required: secret_env or secret_file`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := []string{"key: [{form: id}]", "signature:"}
			for _, l := range tt.sig {
				lines = append(lines, "  "+l)
			}
			_, err := contract.Parse([]byte(senderYAML(lines...)), "test.yaml")
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err =\n%v\nwant it to contain\n%s", err, w)
				}
			}
			assertNoSecrets(t, err.Error(), nil, "fine-secret-value", "no-colon-secret")
		})
	}
}

func TestSchemeNamesListEveryScheme(t *testing.T) {
	_, err := contract.Parse([]byte(senderYAML("key: [{form: id}]", "signature: {scheme: nope}")), "test.yaml")
	want := "known: basic, digest, github, hmac, hmac-sha256, jwt-es256, paddle, paypal, shopify, slack, source-address, standard-webhooks, stripe, token)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want it to list %s", err, want)
	}
}
