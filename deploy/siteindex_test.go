package deploy_test

// A sender path that names a directory (/webhooks/payment) runs the
// directory's index script, and a site that tries extensions runs
// /hooks/notify.php for /hooks/notify: every URL that runs the script must
// get the sender's rules (docs/decision-table.md, "The path rule"). Counted at real PHP.

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/sitetest"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// eventScript reads a Stripe-style event id from the JSON body.
const eventScript = `<?php
$event = json_decode(file_get_contents('php://input'), true);
$id = sitetest_id((string)($event['id'] ?? ''));
header('Content-Type: application/json');
echo json_encode(['received' => true, 'event' => $id]);
`

var indexScripts = map[string]string{
	"webhooks/payment/index.php": eventScript, // the directory's index script
	"hooks/notify.php":           eventScript, // /hooks/notify on an extension-trying site
	"catalog/index.php":          `<?php echo "catalog\n";`,
}

// indexSenders are signed (Stripe's scheme) on extensionless paths.
const indexSenders = `
senders:
  - name: payments
    preset: stripe
    match: { path: /webhooks/payment }
    signature: { secret_env: SITE_TEST_STRIPE_SECRET }
  - name: notify
    preset: stripe
    match: { path: /hooks/notify }
    signature: { secret_env: SITE_TEST_STRIPE_SECRET }
`

// indexSpellings run /webhooks/payment/index.php behind nginx with
// `index index.php; try_files $uri $uri/ …` (/webhooks/payment itself is
// answered 301 to /webhooks/payment/ there).
var indexSpellings = []string{
	"/webhooks/payment/",
	"/webhooks/payment/index.php",
	"/webhooks/payment/index.php/x",
	"/webhooks//payment/./index.php",
	"/webhooks/payment/%69ndex.php",
	"/webhooks/payment%2Findex.php",
	"/webhooks/x/../payment/index.php?page=1",
}

// extensionSpellings run /webhooks/payment/index.php (the first group) and
// /hooks/notify.php (the second) behind `try_files $uri $uri/ $uri.php`.
var extensionSpellings = map[string][]string{
	"/webhooks/payment/index.php": append([]string{"/webhooks/payment/index", "/webhooks//payment/%69ndex"}, indexSpellings...),
	"/hooks/notify.php": {
		"/hooks/notify", "/hooks//notify", "/hooks/notify.php", "/hooks/notify.php/x",
		"/hooks/./notify%2ephp", "/hooks/x/../notify.php/y/z", "/hooks%2Fnotify",
	},
}

// startIndexSite runs a site with nginx directives for its "location /",
// and hookonce (config) in front of it.
func startIndexSite(t *testing.T, location, config string) (*sitetest.Site, *proxytest.Instance) {
	t.Helper()
	t.Setenv("SITE_TEST_STRIPE_SECRET", stripeSecret)
	site := sitetest.Start(t, sitetest.Options{Scripts: indexScripts, Directives: "location / { " + location + " }"})
	ho := startHookonce(t, site.URL, config)
	return site, ho
}

// checkOneRun sends one signed event on every spelling, then an unsigned
// one on each, through addr, and counts the runs of script at PHP: one for
// the signed event (the first spelling runs it, the rest are replays), none
// for the unsigned.
func checkOneRun(t *testing.T, site *sitetest.Site, addr, script string, spellings []string) {
	t.Helper()
	id := fmt.Sprintf("evt_%s_%d", filepath.Base(script), time.Now().UnixNano())
	body := fmt.Sprintf(`{"id":%q,"type":"payment_intent.succeeded"}`, id)
	sig := signStripe(time.Now().Unix(), body)
	for i, sp := range spellings {
		r := send(t, addr, "127.0.0.1", "POST", sp, body, "Stripe-Signature", sig)
		if r.status != 200 || r.replayed() != (i > 0) {
			t.Errorf("signed POST %s: %d replayed=%v %s; want 200, replayed after the first", sp, r.status, r.replayed(), r.body)
		}
	}
	if n := site.Count(t, script, id); n != 1 {
		t.Errorf("signed event: %s ran %d times at PHP, want 1: %+v", script, n, runsOf(t, site, id))
	}
	unsigned := "evt_unsigned_" + id
	body = fmt.Sprintf(`{"id":%q,"type":"payment_intent.succeeded"}`, unsigned)
	for _, sp := range spellings {
		if r := send(t, addr, "127.0.0.1", "POST", sp, body); r.status != http.StatusUnauthorized {
			t.Errorf("unsigned POST %s: %d %s, want 401", sp, r.status, r.body)
		}
	}
	if n := site.Count(t, "", unsigned); n != 0 {
		t.Errorf("unsigned event ran %d times at PHP, want 0: %+v", n, runsOf(t, site, unsigned))
	}
}

// checkBare: without hookonce, every spelling runs the script, so each is
// a way around the sender's rules unless hookonce gives it the sender.
func checkBare(t *testing.T, site *sitetest.Site, script string, spellings []string) {
	t.Helper()
	for i, sp := range spellings {
		id := fmt.Sprintf("bare-%s-%d", script, i)
		r := send(t, site.URL, "127.0.0.1", "POST", sp, fmt.Sprintf(`{"id":%q}`, id))
		if r.status != 200 || site.Count(t, script, id) != 1 {
			t.Errorf("POST %s at the site: %d, runs %+v; want %s run once", sp, r.status, runsOf(t, site, id), script)
		}
	}
}

// TestIndexScriptOwnedBySender: a directory sender (site.index's default,
// index.php) owns the index script in every spelling, through hookonce
// alone and through deploy/nginx's front server; a look-alike on a
// case-insensitive file system is refused; pages still pass.
func TestIndexScriptOwnedBySender(t *testing.T) {
	const script = "/webhooks/payment/index.php"
	t.Run("StraightToHookonce", func(t *testing.T) {
		site, ho := startIndexSite(t, "try_files $uri $uri/ =404;", indexSenders)
		checkBare(t, site, script, indexSpellings)
		checkOneRun(t, site, ho.URL, script, indexSpellings)
		for _, sp := range []string{"/webhooks/payment/INDEX.php", "/Webhooks/payment/", "/webhooks/payment/index.php."} {
			if r := send(t, ho.URL, "127.0.0.1", "POST", sp, `{"id":"lookalike"}`); r.status != http.StatusBadRequest {
				t.Errorf("POST %s: %d %s, want 400", sp, r.status, r.body)
			}
		}
		if r := send(t, ho.URL, "127.0.0.1", "GET", "/catalog/", ""); r.status != 200 || r.body != "catalog\n" {
			t.Errorf("GET /catalog/: %d %q, want the page", r.status, r.body)
		}
		if n := site.Count(t, "", "lookalike"); n != 0 {
			t.Errorf("look-alikes ran %d times", n)
		}
	})
	t.Run("ThroughNginx", func(t *testing.T) {
		s := startStack(t, indexScripts, "trusted_proxies: [127.0.0.1]\n"+indexSenders, []string{"/webhooks/payment", "/hooks/notify"})
		checkOneRun(t, s.site, s.front.URL, script, indexSpellings)
	})
}

// TestExtensionScriptOwnedBySender: on a site that tries .php after an
// extensionless URL (site.extensions: [.php]), /hooks/notify's sender owns
// /hooks/notify.php in every spelling, and /webhooks/payment's its index
// script spelled without the extension.
func TestExtensionScriptOwnedBySender(t *testing.T) {
	site, ho := startIndexSite(t, "try_files $uri $uri/ $uri.php$is_args$args;", "site: { extensions: [.php] }\n"+indexSenders)
	for _, script := range []string{"/webhooks/payment/index.php", "/hooks/notify.php"} {
		t.Run(filepath.Base(filepath.Dir(script))+"/"+filepath.Base(script), func(t *testing.T) {
			checkBare(t, site, script, extensionSpellings[script])
			checkOneRun(t, site, ho.URL, script, extensionSpellings[script])
		})
	}
}
