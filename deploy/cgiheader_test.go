package deploy_test

// Headers PHP reads as one: X-Signature and X_Signature are both
// $_SERVER['HTTP_X_SIGNATURE'] once nginx passes names with underscores
// (underscores_in_headers on, a common setting on sites that take custom
// headers). Counted at real PHP: an extra underscore spelling can neither
// make the site refuse a delivery that hookonce then stores as done, nor
// make hookonce store an event under another id than the site read.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/hookonce/hookonce/internal/testkit/sitetest"
)

const cgiSecret = "cgi-s3cret"

// A hand-written handler of the kind the docs' generic sender describes:
// it checks its own HMAC and reads the event id from a header.
var cgiScripts = map[string]string{
	"hooks/sig.php": `<?php
$body = file_get_contents('php://input');
$sig = $_SERVER['HTTP_X_SIGNATURE'] ?? '';
if (!hash_equals(hash_hmac('sha256', $body, '` + cgiSecret + `'), $sig)) { http_response_code(403); echo "bad signature\n"; exit; }
sitetest_id((string)($_SERVER['HTTP_X_EVENT_ID'] ?? ''));
echo "ok\n";
`,
	// A form handler keyed on its POST field.
	"hooks/form.php": `<?php
sitetest_id((string)($_POST['id'] ?? ''));
echo "ok\n";
`,
}

const cgiConfig = `
senders:
  - name: erp
    match: { path: /hooks/sig.php }
    key: [ { header: X-Event-Id } ]
    signature: { scheme: hmac-sha256, header: X-Signature, encoding: hex, secret_env: SITE_TEST_CGI_SECRET }
  - name: form
    match: { path: /hooks/form.php }
    key: [ { form: id } ]
`

func TestHeaderSpellingsPHPMerges(t *testing.T) {
	t.Setenv("SITE_TEST_CGI_SECRET", cgiSecret)
	site := sitetest.Start(t, sitetest.Options{Scripts: cgiScripts, Directives: "underscores_in_headers on;"})
	ho := startHookonce(t, site.URL, cgiConfig)
	body := `{"order":42,"amount":"10.00"}`
	m := hmac.New(sha256.New, []byte(cgiSecret))
	m.Write([]byte(body))
	sig := hex.EncodeToString(m.Sum(nil))

	// The site setup merges the spellings, the last one winning: sent to
	// the site directly, the copy with a junk X_Signature is refused.
	if r := send(t, site.URL, "127.0.0.1", "POST", "/hooks/sig.php", body, "X-Signature", sig, "X-Event-Id", "direct", "X_Signature", "junk"); r.status != 403 {
		t.Fatalf("precondition: the site answered %d %q to X_Signature after X-Signature, want its own 403", r.status, r.body)
	}

	t.Run("Signature", func(t *testing.T) {
		r := send(t, ho.URL, "127.0.0.1", "POST", "/hooks/sig.php", body, "X-Signature", sig, "X-Event-Id", "u1", "X_Signature", "junk")
		if r.status != 401 {
			t.Fatalf("copy with X_Signature: %d %q, want 401 (the signature header sent twice)", r.status, r.body)
		}
		for i := range 3 {
			if r := send(t, ho.URL, "127.0.0.1", "POST", "/hooks/sig.php", body, "X-Signature", sig, "X-Event-Id", "u1"); r.status != 200 || r.body != "ok\n" {
				t.Fatalf("genuine delivery %d: %d %q", i, r.status, r.body)
			}
		}
		if n := len(runsOf(t, site, "u1")); n != 1 {
			t.Fatalf("event u1 ran %d times, want once", n)
		}
	})

	t.Run("EventID", func(t *testing.T) {
		r := send(t, ho.URL, "127.0.0.1", "POST", "/hooks/sig.php", body, "X-Signature", sig, "X-Event-Id", "u2", "X_Event_Id", "u999")
		if r.status != 400 {
			t.Fatalf("copy with X_Event_Id: %d %q, want 400 (the id header sent twice)", r.status, r.body)
		}
		if n := len(runsOf(t, site, "u999")) + len(runsOf(t, site, "u2")); n != 0 {
			t.Fatalf("the copy ran the handler %d times", n)
		}
		for range 2 {
			send(t, ho.URL, "127.0.0.1", "POST", "/hooks/sig.php", body, "X-Signature", sig, "X-Event-Id", "u2")
		}
		if n := len(runsOf(t, site, "u2")); n != 1 {
			t.Fatalf("event u2 ran %d times, want once", n)
		}
	})

	t.Run("ContentTypeUnderscore", func(t *testing.T) {
		// PHP reads the body by CONTENT_TYPE, which only the real header
		// sets: a Content_Type beside it changes nothing at the site, and
		// hookonce does not refuse what the site would take.
		form := []string{"Content-Type", "application/x-www-form-urlencoded", "Content_Type", "text/plain"}
		if r := send(t, site.URL, "127.0.0.1", "POST", "/hooks/form.php", "id=direct-ct", form...); r.status != 200 || len(runsOf(t, site, "direct-ct")) != 1 {
			t.Fatalf("precondition: the site answered %d %q and did not read the form", r.status, r.body)
		}
		for range 2 {
			if r := send(t, ho.URL, "127.0.0.1", "POST", "/hooks/form.php", "id=u4", form...); r.status != 200 {
				t.Fatalf("with Content_Type: %d %q, want the site's answer", r.status, r.body)
			}
		}
		if n := len(runsOf(t, site, "u4")); n != 1 {
			t.Fatalf("event u4 ran %d times, want once", n)
		}
	})

	t.Run("UnderscoreOnly", func(t *testing.T) {
		// Sent only as X_Event_Id, the id is the one PHP reads: hookonce
		// keys the event on it, and its repeat is a duplicate.
		for range 2 {
			if r := send(t, ho.URL, "127.0.0.1", "POST", "/hooks/sig.php", body, "X_Signature", sig, "X_Event_Id", "u3"); r.status != 200 {
				t.Fatalf("underscore spellings: %d %q", r.status, r.body)
			}
		}
		if n := len(runsOf(t, site, "u3")); n != 1 {
			t.Fatalf("event u3 ran %d times, want once", n)
		}
	})
}
