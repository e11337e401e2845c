package contract_test

import (
	"strings"
	"testing"

	"github.com/hookonce/hookonce/contract"
)

// A key part outside what the signature vouches for is warned about: a
// captured signed delivery sent again under another event id would run
// the handler again.
func TestCheckWarnsAboutKeysOutsideTheSignature(t *testing.T) {
	t.Setenv("COV_SECRET", "s")
	for _, tt := range []struct {
		name  string
		lines []string
		warn  string // "" for none
	}{
		{"header id, body HMAC", []string{"key: [{header: X-Event-Id}]",
			"signature: {scheme: hmac-sha256, header: X-Sig, secret_env: COV_SECRET}"}, "header X-Event-Id"},
		{"body id, body HMAC", []string{"key: [{body: data.id}]",
			"signature: {scheme: hmac-sha256, header: X-Sig, secret_env: COV_SECRET}"}, ""},
		{"query id, body HMAC", []string{"key: [{query: id}]",
			"signature: {scheme: hmac, message: {body: true}, from: [{header: X-Sig}], secret_env: COV_SECRET}"}, "query id"},
		{"request id in the signed parts", []string{"key: [{request: InvId}]",
			`signature: {scheme: digest, algorithm: md5, message: {parts: ["{request.OutSum}", "{request.InvId}", "{secret}"], join: ":"}, from: [{request: SignatureValue}], secret_env: COV_SECRET}`}, ""},
		{"request id, signed fields of the request", []string{"key: [{request: mdOrder}]",
			"signature: {scheme: hmac, message: {fields: {source: request, exclude: [checksum], format: \"{k};{v};\"}}, from: [{request: checksum}], secret_env: COV_SECRET}"}, ""},
		{"an excluded field", []string{"key: [{request: sign_alias}]",
			"signature: {scheme: hmac, message: {fields: {source: request, exclude: [checksum, sign_alias], format: \"{k};{v};\"}}, from: [{request: checksum}], secret_env: COV_SECRET}"}, "request sign_alias"},
		{"form id, request fields signed", []string{"key: [{form: id}]",
			"signature: {scheme: hmac, message: {fields: {source: request, exclude: [sig]}}, from: [{request: sig}], secret_env: COV_SECRET}"}, ""},
		{"request id, only the body signed", []string{"key: [{request: id}]",
			"signature: {scheme: hmac, message: {body: true}, from: [{header: X-Sig}], secret_env: COV_SECRET}"}, "request id"},
		{"a token vouches for no content", []string{"key: [{header: X-Event-Id}]",
			"signature: {scheme: token, from: [{header: X-Token}], secret_env: COV_SECRET}"}, ""},
		{"a preset's own key is documented, not warned", []string{"preset: github", "signature: {secret_env: COV_SECRET}"}, ""},
		{"a preset's key overridden by the file", []string{"preset: github", "signature: {secret_env: COV_SECRET}",
			"key: [{header: X-GitHub-Delivery}]"}, "header X-Github-Delivery"},
		{"standard webhooks sign their id", []string{"preset: standard-webhooks", "signature: {secret_env: COV_SECRET}",
			"key: [{header: webhook-id}]"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if strings.Contains(tt.name, "standard") {
				t.Setenv("COV_SECRET", "whsec_c2VjcmV0")
			}
			c, err := contract.Parse([]byte(senderYAML(tt.lines...)), "test.yaml")
			if err != nil {
				t.Fatal(err)
			}
			var got string
			for _, w := range c.Warnings {
				if strings.Contains(w, "not covered by the signature") {
					got = w
				}
			}
			switch {
			case tt.warn == "" && got != "":
				t.Errorf("warned: %s", got)
			case tt.warn != "" && !strings.Contains(got, "key "+tt.warn+" is not covered"):
				t.Errorf("warnings %q, want one naming %q", c.Warnings, tt.warn)
			}
		})
	}
}
