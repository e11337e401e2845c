package deploy_test

import (
	"context"
	"crypto/md5"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe/sqlite"
	"github.com/hookonce/hookonce/internal/testkit/providersign"
	"github.com/hookonce/hookonce/internal/testkit/sitetest"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// durableRobokassa is a Result URL handler as a Bitrix shop's works: it
// reads $_POST, checks Robokassa's signature with password #2, and
// applies the payment once it can (a file in data/ says whether the
// shop's database is down: then 503).
const durableRobokassa = `<?php
$inv = sitetest_id((string)($_POST['InvId'] ?? ''));
if (file_exists(__DIR__ . '/../../../data/down')) { http_response_code(503); echo 'database is down'; exit; }
$shp = [];
foreach ($_POST as $k => $v) { if (stripos($k, 'shp_') === 0) { $shp[$k] = $v; } }
ksort($shp);
$msg = ($_POST['OutSum'] ?? '') . ':' . $inv . ':robo-password-2';
foreach ($shp as $k => $v) { $msg .= ':' . $k . '=' . $v; }
if (strtoupper(md5($msg)) !== strtoupper($_POST['SignatureValue'] ?? '')) { echo 'bad sign'; exit; }
file_put_contents(__DIR__ . '/../../../data/paid.log', $inv . "\n", FILE_APPEND | LOCK_EX);
echo 'OK' . $inv;
`

// TestDurableReachesPHP: with ack: durable, a Robokassa payment sent while
// the shop's PHP fails is answered OK77 by hookonce, kept, and tried
// again from the store until PHP takes it: real PHP behind real nginx
// reads the stored request's $_POST as it would have read the sender's
// (the signature verifies there), and applies the payment once.
func TestDurableReachesPHP(t *testing.T) {
	site := sitetest.Start(t, sitetest.Options{Scripts: map[string]string{"bitrix/tools/sale_ps_result.php": durableRobokassa}})
	down := filepath.Join(site.Data, "down")
	if err := os.WriteFile(down, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ROBOKASSA_PASSWORD2", "robo-password-2")
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hookonce.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	ho := proxytest.StartWith(t, store, site.URL, `
senders:
  - name: robokassa
    preset: robokassa
    match: { path: /bitrix/tools/sale_ps_result.php }
    signature: { secret_env: ROBOKASSA_PASSWORD2 }
    ack: durable
`, func(o *proxy.Options) {
		o.DurableBackoff = []time.Duration{200 * time.Millisecond}
		o.DurablePoll = 50 * time.Millisecond
	})
	f := url.Values{"OutSum": {"1500.000000"}, "InvId": {"77"}, "SHP_HANDLER": {"ROBOXCHANGE"}, "SHP_BX_PAYSYSTEM_CODE": {"7"}}
	f.Set("SignatureValue", providersign.Robokassa(md5.New, "robo-password-2", f))
	got := proxytest.Post(t, ho.URL+"/bitrix/tools/sale_ps_result.php", f.Encode(), "Content-Type", "application/x-www-form-urlencoded")
	if got.Status != 200 || string(got.Body) != "OK77" {
		t.Fatalf("answer while PHP fails: %d %q, want OK77", got.Status, got.Body)
	}
	paid := func() string {
		b, _ := os.ReadFile(filepath.Join(site.Data, "paid.log"))
		return string(b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(runsOf(t, site, "77")) < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if paid() != "" {
		t.Fatalf("applied while the database was down: %q", paid())
	}
	if err := os.Remove(down); err != nil {
		t.Fatal(err)
	}
	for paid() == "" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(600 * time.Millisecond) // a second application would come now
	if p := paid(); p != "77\n" {
		t.Fatalf("payments applied: %q, want 77 once (runs: %+v; hookonce log:\n%s)", p, runsOf(t, site, "77"), ho.Logs.String())
	}
	for _, r := range runsOf(t, site, "77") {
		if r.Method != "POST" || !strings.HasPrefix(r.IdempotencyKey, "robokassa:77") {
			t.Fatalf("a try reached PHP as %+v", r)
		}
	}
}
