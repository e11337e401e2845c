package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check warns about a sender that can never get a request (one listed
// before it on the same path and method takes all of them), and about a
// secret file others on the host may read or change; the README's
// quick-start config gets neither.
func TestCheckWarnsAboutSendersThatCannotBeToldApart(t *testing.T) {
	t.Setenv("ROBOKASSA_PASSWORD2", "pw2")
	t.Setenv("TBANK_PASSWORD", "tb")
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	const path = "/bitrix/tools/sale_ps_result.php"
	noWhen := write("nowhen.yaml", `senders:
  - name: robokassa
    preset: robokassa
    match: { path: `+path+` }
    signature: { secret_env: ROBOKASSA_PASSWORD2 }
  - name: tbank
    preset: tbank
    match: { path: `+path+`, when: [ { body: TerminalKey, present: true } ] }
    signature: { secret_env: TBANK_PASSWORD }
`, 0o600)
	sameWhen := write("samewhen.yaml", `senders:
  - name: robokassa
    preset: robokassa
    match: { path: `+path+`, when: [ { request: OutSum, present: true } ] }
    signature: { secret_env: ROBOKASSA_PASSWORD2 }
  - name: tbank
    preset: tbank
    match: { path: `+path+`, when: [ { body: TerminalKey, present: true }, { request: OutSum, matches: "^[0-9]+$" } ] }
    signature: { secret_env: TBANK_PASSWORD }
`, 0o600)
	otherMethod := write("othermethod.yaml", `senders:
  - name: get
    match: { path: /x.php, method: GET }
    key: [ { query: id } ]
  - name: post
    match: { path: /x.php, method: POST }
    key: [ { form: id } ]
`, 0o600)
	readme := write("readme.yaml", readmeQuickStart(t), 0o600)
	write("open.secret", "s3cret-value\n", 0o644)
	write("groupw.secret", "s3cret-value\n", 0o660)
	write("closed.secret", "s3cret-value\n", 0o600)
	secrets := write("secrets.yaml", `senders:
  - name: a
    match: { path: /a }
    key: [ { header: X-Id } ]
    signature: { scheme: hmac-sha256, header: X-Sig, secret_file: open.secret }
  - name: b
    match: { path: /b }
    key: [ { header: X-Id } ]
    signature: { scheme: hmac-sha256, header: X-Sig, secret_file: groupw.secret, previous_secret_file: closed.secret }
`, 0o600)

	for _, tt := range []struct {
		name    string
		config  string
		want    []string
		wantNot []string
	}{
		{"the first sender has no when", noWhen,
			[]string{`senders "robokassa" and "tbank" can take the same request (path ` + path + `, POST): robokassa is listed first and it has no match.when, so tbank never gets one`}, nil},
		{"the first sender's when holds whenever the second's does", sameWhen,
			[]string{`senders "robokassa" and "tbank" can take the same request (path ` + path + `, POST): robokassa is listed first and its match.when conditions hold whenever tbank's do`}, nil},
		{"senders told apart by method", otherMethod, nil, []string{"warning"}},
		{"the README's quick start", readme, nil, []string{"warning"}},
		{"secret files others may read or change", secrets,
			[]string{`:5: field secret_file: the secret file ` + filepath.Join(dir, "open.secret") + ` (mode 0644) is readable by every user on the host`,
				`:9: field secret_file: the secret file ` + filepath.Join(dir, "groupw.secret") + ` (mode 0660) is writable by others than its owner`},
			[]string{"closed.secret", "s3cret-value"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := hookonce(t, "check", "--config", tt.config)
			if code != 0 || !strings.Contains(stdout, ": ok, ") {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, "warning: "+tt.config) || !strings.Contains(stderr, w) {
					t.Errorf("stderr:\n%s\nwant a warning with %q", stderr, w)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(stderr, w) {
					t.Errorf("stderr:\n%s\nhas %q", stderr, w)
				}
			}
		})
	}
}

// readmeQuickStart is the config block of the README's quick start.
func readmeQuickStart(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "<!-- quickstart-config -->")
	if !ok {
		t.Fatal("README.md has no <!-- quickstart-config --> block")
	}
	_, rest, _ = strings.Cut(rest, "```yaml\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("README.md: the quick-start block does not end")
	}
	var b strings.Builder
	for line := range strings.SplitSeq(block, "\n") {
		b.WriteString(strings.TrimPrefix(line, "   ") + "\n") // the block is indented in a list
	}
	return b.String()
}

// check --request exits 1 when hookonce would refuse the request (401,
// 400, 403, 405, 413) and 0 when it would take it, and says which in its
// last line.
func TestCheckRequestExitsOneOnARefusal(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookonce.yaml")
	writeFile(t, cfg, `max_body: 64
senders:
  - name: robokassa
    match: { path: /s.php, method: "GET,POST", when: [ { request: SHP_HANDLER, equals: ROBOXCHANGE } ] }
    key: [ { request: InvId } ]
  - name: one
    match: { path: /one.php }
    key: [ { form: id } ]
  - name: strict
    match: { path: /strict.php, when: [ { form: kind, equals: pay } ] }
    key: [ { form: id } ]
paths:
  /strict.php: { unmatched: reject }
`)
	form := "Content-Type: application/x-www-form-urlencoded\n\n"
	for _, tt := range []struct {
		name, request string
		code          int
		verdict       string
	}{
		{"taken by its sender", "POST /s.php HTTP/1.1\nHost: x\n" + form + "InvId=1&SHP_HANDLER=ROBOXCHANGE", 0,
			"verdict: taken: claimed as robokassa:1"},
		{"no sender takes it on a shared path: the site's", "GET /s.php?operation=deposited&mdOrder=1 HTTP/1.1\nHost: x\n\n", 3,
			"verdict: taken: forwarded to the site untouched, no dedupe"},
		{"a method no sender accepts", "PUT /s.php HTTP/1.1\nHost: x\n\n", 1,
			"verdict: refused 405: no sender on this path accepts the method PUT"},
		{"unmatched: reject", "POST /strict.php HTTP/1.1\nHost: x\n" + form + "kind=other&id=1", 1,
			"verdict: refused 403: no sender on this path takes it (unmatched: reject (set in paths:))"},
		{"no event id on a one-sender path", "POST /one.php HTTP/1.1\nHost: x\n" + form + "x=1", 1,
			"verdict: refused 400: no usable event id"},
		{"over max_body", "POST /one.php HTTP/1.1\nHost: x\n" + form + "id=1&pad=" + strings.Repeat("x", 100), 1,
			"verdict: refused 413: the body is over max_body (64 bytes)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := filepath.Join(dir, "req.http")
			writeFile(t, req, tt.request)
			stdout, stderr, code := hookonce(t, "check", "--config", cfg, "--request", req)
			if code != tt.code || !strings.Contains(stdout, tt.verdict) {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s\nwant %q", code, tt.code, stdout, stderr, tt.verdict)
			}
		})
	}
}
