package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fixtures live beside the contract package's other test data.
const checkDir = "../../contract/testdata/check"

func TestCheckRequest(t *testing.T) {
	cfg := filepath.Join(checkDir, "hookonce.yaml")
	shopHash := "hash: sha256:a348cbdc7e638023375d656b33e946224f1f8b28e3a20ae890a1a02494d1e4e1\n" // python json.dumps(sort_keys, compact) without "attempt"
	tests := []struct {
		name    string
		request string
		extra   []string
		want    string
	}{
		{"github docs vector, CRLF, trailing newline past Content-Length", "github.http", nil,
			"sender: github\nkey: 72d3162e-cc78-11e3-81ab-4c9367dc0958\n" +
				"hash: sha256:dffd6021bb2bd5b0af676290809ec3a53191dd81c7f70a4b28688a362182986f\nsignature: valid\n"},
		{"tampered body, LF only, no Content-Length", "github-tampered.http", nil,
			"sender: github\nkey: 72d3162e-cc78-11e3-81ab-4c9367dc0958\n" +
				"hash: sha256:f16c3bb0532537acd5b2e418f2b1235b29181e35cffee7cc29d84de4a1d62e4d\nsignature: invalid: signature mismatch\n"},
		{"slack docs vector judged at its own time", "slack.http", []string{"--now", "1531420700"},
			"sender: slack\nkey: 398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c\n" +
				"hash: sha256:390eeeff8d0cb7c9f6ecf8a88c3df6452fea0914eb02f64844369f3758d8d330\nsignature: valid\n"},
		{"slack docs vector judged now", "slack.http", nil,
			"sender: slack\nkey: 398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c\n" +
				"hash: sha256:390eeeff8d0cb7c9f6ecf8a88c3df6452fea0914eb02f64844369f3758d8d330\nsignature: invalid: timestamp outside tolerance\n"},
		{"json hash without attempt", "shop-attempt1.http", nil,
			"sender: shop\nkey: ord-7:42\n" + shopHash + "signature: none\n"},
		{"same event, other attempt, chunked, keys reordered", "shop-attempt2-chunked.http", nil,
			"sender: shop\nkey: ord-7:42\n" + shopHash + "signature: none\n"},
		{"missing key", "shop-no-key.http", nil,
			"sender: shop\nkey: missing: header X-Event-Id absent or empty (missing_key: reject)\n" +
				"hash: sha256:16bda2f4c791a2516432b276e5ab06437fbc7e684dedc77c50c9760f75f267ac\nsignature: none\n"},
		{"form key", "legacy.http", nil,
			"sender: legacy\nkey: 77\nhash: sha256:f168cb0a798d6280f34c4ad7d474ff2474ae86f298accceb82c8b1a74642fea8\nsignature: none\n"},
		{"no sender", "nomatch.http", nil, "no sender matched GET /index.php\n"},
		{"one of two senders on a path, by content, on a path variant", "bitrix-yookassa.http", nil,
			"sender: yookassa\nkey: 2d6e:payment.succeeded\n" +
				"hash: sha256:5ac5ff8620054cfd356f799751e93d130842df8208b16657974db56ca23d86e8\nsignature: none\n" +
				"route: /bitrix/tools/sale_ps_result.php (as /bitrix/tools/sale_ps_result.php/x; unmatched: pass (default: every sender on this path has match.when))\n" +
				"tried: robokassa: form SHP_HANDLER equals \"ROBOXCHANGE\" does not hold\n" +
				"tried: yookassa: body object.metadata.BX_HANDLER equals \"YANDEX_CHECKOUT\" hold\n"},
		{"on a sender path, matching none", "bitrix-unmatched.http", nil,
			"no sender matched POST /bitrix/tools/sale_ps_result.php\n" +
				"route: /bitrix/tools/sale_ps_result.php (as /bitrix/tools/sale_ps_result.php; unmatched: pass (default: every sender on this path has match.when))\n" +
				"tried: robokassa: form SHP_HANDLER equals \"ROBOXCHANGE\" does not hold\n" +
				"tried: yookassa: body object.metadata.BX_HANDLER equals \"YANDEX_CHECKOUT\" does not hold\n"},
		{"on a sender path, a condition that could not be read", "bitrix-unreadable.http", nil,
			"no sender matched POST /bitrix/tools/sale_ps_result.php\n" +
				"reason: a match.when value cannot be read as the site reads it: sender robokassa: form SHP_HANDLER equals \"ROBOXCHANGE\": " +
				"the value holds control characters, and a site that trims or strips them reads it otherwise (hookonce answers 400)\n" +
				"route: /bitrix/tools/sale_ps_result.php (as /bitrix/tools/sale_ps_result.php; unmatched: pass (default: every sender on this path has match.when))\n" +
				"tried: robokassa: form SHP_HANDLER equals \"ROBOXCHANGE\" could not be read: the value holds control characters, and a site that trims or strips them reads it otherwise\n"},
	}
	// The last line is the verdict; a refusal exits 1, a request no sender
	// takes (the site gets it unguarded) 3.
	verdicts := map[string]string{
		"tampered body, LF only, no Content-Length": "verdict: refused 401: the signature does not hold\n",
		"slack docs vector judged now":              "verdict: refused 401: the signature does not hold\n",
		"missing key":                               "verdict: refused 400: no usable event id\n",
		"no sender":                                 "verdict: taken: passed through to the site untouched (no sender names this path)\n",
		"on a sender path, a condition that could not be read":           "verdict: refused 400: a match.when value could not be read as the site reads it\n",
		"on a sender path, matching none":                                "verdict: taken: forwarded to the site untouched, no dedupe (no sender takes it; unmatched: pass (default: every sender on this path has match.when))\n",
		"github docs vector, CRLF, trailing newline past Content-Length": "verdict: taken: claimed as github:72d3162e-cc78-11e3-81ab-4c9367dc0958 (new: forwarded once; a repeat gets the stored answer)\n",
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"check", "--config", cfg, "--request", filepath.Join(checkDir, tt.request)}, tt.extra...)
			stdout, stderr, code := hookonce(t, args...)
			wantCode := 0
			switch v := verdicts[tt.name]; {
			case strings.Contains(v, "refused"):
				wantCode = 1
			case strings.Contains(v, "untouched"): // no sender takes it
				wantCode = 3
			}
			if code != wantCode || !strings.HasPrefix(stdout, tt.want) {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s\nwant stdout:\n%s", code, wantCode, stdout, stderr, tt.want)
			}
			if v := verdicts[tt.name]; v != "" && !strings.HasSuffix(stdout, v) {
				t.Errorf("stdout ends:\n%s\nwant %q", stdout, v)
			}
			if !strings.Contains(stdout, "\nverdict: ") {
				t.Errorf("no verdict line:\n%s", stdout)
			}
		})
	}
}

func TestCheckConfig(t *testing.T) {
	t.Setenv("ROBOKASSA_PASSWORD2", "change-me") // the shipped example's secrets
	t.Setenv("TBANK_PASSWORD", "change-me")
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	short := write("short.yaml", "defaults: {ttl: 1h}\nsenders:\n  - name: stripe\n    preset: stripe\n    match: {path: /stripe}\n    signature: {secret_file: stripe.secret}\n")
	write("stripe.secret", "whsec_do_not_print_me\n")
	noEnv := write("noenv.yaml", "senders:\n  - name: gh\n    preset: github\n    match: {path: /gh}\n    signature:\n      secret_env: HOOKONCE_TEST_UNSET_SECRET\n")
	yamlErr := write("broken.yaml", "senders:\n  - name: a\n    match: {path: /a\n")
	tbankShort := write("tbank.yaml", "senders:\n  - name: tbank\n    preset: tbank\n    ttl: 2h\n    match: {path: /tb}\n    signature: {secret_file: stripe.secret}\n")
	// Every preset with nothing but what it needs: no ttl, no method.
	var presetsOnly strings.Builder
	presetsOnly.WriteString("senders:\n")
	names := []string{"stripe", "github", "shopify", "standard-webhooks", "slack", "robokassa", "yookassa", "tbank", "cloudpayments", "rbs", "bitrix24"}
	for _, p := range names {
		presetsOnly.WriteString("  - {name: " + p + ", preset: " + p + ", match: {path: /" + p + "}")
		if p != "yookassa" {
			presetsOnly.WriteString(", signature: {secret_file: whsec.secret}")
		}
		presetsOnly.WriteString("}\n")
	}
	defaultPresets := write("presets.yaml", presetsOnly.String())
	write("whsec.secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
	const example = "../../hookonce.example.yaml"

	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string
		stderrHas  []string
		stderrNone []string
	}{
		{"valid", []string{"--config", filepath.Join(checkDir, "hookonce.yaml")}, 0,
			filepath.Join(checkDir, "hookonce.yaml") + ": ok, 6 sender(s): github, slack, shop, legacy, robokassa, yookassa\n", nil, nil},
		{"ttl shorter than the retry window warns", []string{"--config", short}, 0,
			short + ": ok, 1 sender(s): stripe\n",
			[]string{"warning: " + short + `: sender "stripe": ttl 1h0m0s is shorter than the stripe retry window 72h0m0s`},
			[]string{"do_not_print_me"}},
		{"tbank with a ttl under its 24h window warns", []string{"--config", tbankShort}, 0,
			tbankShort + ": ok, 1 sender(s): tbank\n",
			[]string{"warning: " + tbankShort + `: sender "tbank": ttl 2h0m0s is shorter than the tbank retry window 24h0m0s`}, nil},
		{"every preset with default ttl and methods checks without warnings", []string{"--config", defaultPresets}, 0,
			defaultPresets + ": ok, 11 sender(s): " + strings.Join(names, ", ") + "\n", nil, []string{"warning"}},
		{"the shipped example checks without warnings", []string{"--config", example}, 0,
			example + ": ok, 2 sender(s): robokassa, tbank\n", nil, []string{"warning"}},
		{"invalid names file, line, sender, field", []string{"--config", "../../contract/testdata/invalid.yaml"}, 2, "",
			[]string{`../../contract/testdata/invalid.yaml:4: sender "shop": field match.path: "api/webhooks" must start with /`,
				`../../contract/testdata/invalid.yaml:11: sender "shop": field duplicate: "maybe": want replay or a status such as 200`}, nil},
		{"unset secret env", []string{"--config", noEnv}, 2, "",
			[]string{noEnv + `:6: sender "gh": field signature.secret_env: environment variable HOOKONCE_TEST_UNSET_SECRET is not set`}, nil},
		{"yaml syntax", []string{"--config", yamlErr}, 2, "", []string{yamlErr + ":2: did not find expected"}, nil},
		{"missing file", []string{"--config", filepath.Join(dir, "nope.yaml")}, 2, "", []string{"nope.yaml: open "}, nil},
		{"no config", nil, 2, "", []string{"usage: hookonce check [--config FILE]", "no config file"}, nil},
		{"unreadable request", []string{"--config", short, "--request", filepath.Join(dir, "none.http")}, 2, "", []string{"read request: "}, nil},
		{"not http", []string{"--config", filepath.Join(checkDir, "hookonce.yaml"), "--request", filepath.Join(checkDir, "garbage.http")}, 2, "",
			[]string{"not an HTTP/1.1 request"}, nil},
		{"bad --now", []string{"--config", short, "--now", "yesterday"}, 2, "", []string{`--now: "yesterday"`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := hookonce(t, append([]string{"check"}, tt.args...)...)
			if code != tt.code || stdout != tt.stdout {
				t.Fatalf("exit %d, stdout %q, stderr:\n%s\nwant exit %d, stdout %q", code, stdout, stderr, tt.code, tt.stdout)
			}
			for _, want := range tt.stderrHas {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr:\n%s\nwant it to contain %q", stderr, want)
				}
			}
			for _, bad := range tt.stderrNone {
				if strings.Contains(stderr+stdout, bad) {
					t.Errorf("output quotes %q", bad)
				}
			}
		})
	}
}
