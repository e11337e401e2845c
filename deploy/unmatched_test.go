package deploy_test

// "Never break what worked before hookonce": the README's Bitrix config
// names Robokassa and T-Bank on sale_ps_result.php, each by match.when,
// and the shop's own Bitrix dispatch also serves YooKassa and an RBS
// gateway there. hookonce forwards what none of its senders takes,
// untouched, so those keep running exactly once per delivery, as without
// hookonce; Robokassa stays deduplicated; a path with one sender and no
// match.when still refuses what that sender does not take.

import (
	"crypto/md5"
	"net/url"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/internal/testkit/providersign"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// bitrixDispatchScript is sale_ps_result.php as a Bitrix shop with four
// payment systems runs it: the handler is picked by what the request
// holds (Robokassa by SHP_HANDLER, YooKassa by its metadata, RBS by the
// gateway's GET callback with operation and mdOrder, T-Bank by
// TerminalKey), and each records the payment it applied.
const bitrixDispatchScript = `<?php
$raw = file_get_contents('php://input');
$json = json_decode($raw, true);
if (($_REQUEST['SHP_HANDLER'] ?? '') === 'ROBOXCHANGE') {
    sitetest_id('robokassa-' . $_REQUEST['InvId']);
    echo 'OK' . $_REQUEST['InvId'];
    exit;
}
if (is_array($json) && (($json['object']['metadata']['BX_HANDLER'] ?? '') === 'YANDEX_CHECKOUT')) {
    sitetest_id('yookassa-' . $json['object']['id'] . '-' . $json['event']);
    exit;
}
if (isset($_GET['mdOrder'], $_GET['operation'])) {
    sitetest_id('rbs-' . $_GET['mdOrder'] . '-' . $_GET['operation']);
    exit;
}
if (is_array($json) && isset($json['TerminalKey'])) {
    sitetest_id('tbank-' . $json['PaymentId']);
    echo 'OK';
    exit;
}
http_response_code(404);
`

// oneSenderScript is a home-grown callback with one sender and no
// match.when: hookonce owns every request to it.
const oneSenderScript = `<?php
sitetest_id('shop-' . ($_POST['id'] ?? 'none'));
echo 'OK';
`

func TestReadmeBitrixConfigForwardsWhatNoSenderTakes(t *testing.T) {
	t.Setenv("ROBOKASSA_PASSWORD2", "robo-pass-2")
	t.Setenv("TBANK_PASSWORD", "tbank-pass")
	const path = "/bitrix/tools/sale_ps_result.php"
	const one = "/shop/hook.php"
	config := strings.TrimRight(quickstartConfig(t), "\n") + `
  - name: shop
    match: { path: ` + one + ` }
    key: [ { form: id } ]
`
	s := startStack(t, map[string]string{
		"bitrix/tools/sale_ps_result.php": bitrixDispatchScript,
		"shop/hook.php":                   oneSenderScript,
	}, config, []string{path, one})

	robo := url.Values{"OutSum": {"1500.00"}, "InvId": {"4711"}, "SHP_HANDLER": {"ROBOXCHANGE"}}
	robo.Set("SignatureValue", providersign.Robokassa(md5.New, "robo-pass-2", robo))
	// YooKassa's payment.succeeded as its API documents it, with the
	// metadata Bitrix's handler sets and reads.
	yk := `{"type":"notification","event":"payment.succeeded","object":{"id":"2d6e1f93-000f-5000-9000-1b68e7b15f3f",` +
		`"status":"succeeded","paid":true,"amount":{"value":"1500.00","currency":"RUB"},"metadata":{"BX_HANDLER":"YANDEX_CHECKOUT","BX_PAYMENT_NUMBER":"77/1"}}}`
	// The RBS gateway's callback: a GET with the operation and the order.
	rbs := path + "?mdOrder=7b1c0e3a-85f2-4d5e-9a1b-0c2d3e4f5a6b&orderNumber=77&operation=deposited&status=1"
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}

	// YooKassa and RBS: the site's own dispatch decides, once per delivery,
	// as it did without hookonce (YooKassa retries; each retry runs it).
	r := send(t, s.front.URL, "127.0.0.2", "POST", path, yk)
	if r.status != 200 || r.replayed() {
		t.Fatalf("YooKassa: %d %q replayed=%v; want the site's 200", r.status, r.body, r.replayed())
	}
	if runs := s.runs(t, "yookassa-2d6e1f93-000f-5000-9000-1b68e7b15f3f-payment.succeeded"); len(runs) != 1 {
		t.Fatalf("the YooKassa handler ran %d times, want once", len(runs))
	}
	r = send(t, s.front.URL, "127.0.0.2", "GET", rbs, "")
	if r.status != 200 || r.replayed() {
		t.Fatalf("RBS: %d %q; want the site's 200", r.status, r.body)
	}
	if runs := s.runs(t, "rbs-7b1c0e3a-85f2-4d5e-9a1b-0c2d3e4f5a6b-deposited"); len(runs) != 1 {
		t.Fatalf("the RBS handler ran %d times, want once", len(runs))
	}

	// Robokassa is still hookonce's: its repeat is replayed, run once.
	for i := range 3 {
		r := send(t, s.front.URL, "127.0.0.2", "GET", path+"?"+robo.Encode(), "")
		if r.status != 200 || r.body != "OK4711" || (i > 0) != r.replayed() {
			t.Fatalf("Robokassa delivery %d: %d %q replayed=%v", i+1, r.status, r.body, r.replayed())
		}
	}
	if runs := s.runs(t, "robokassa-4711"); len(runs) != 1 {
		t.Fatalf("the Robokassa handler ran %d times, want once", len(runs))
	}

	// A path with one sender and no match.when keeps its refusals: a
	// delivery without the event id gets 400, a method it does not take
	// 405, and neither runs the script.
	if r := send(t, s.front.URL, "127.0.0.2", "POST", one, "x=1", form...); r.status != 400 {
		t.Errorf("one-sender path, no id: %d %q, want 400", r.status, r.body)
	}
	if r := send(t, s.front.URL, "127.0.0.2", "PUT", one, "id=5", form...); r.status != 405 {
		t.Errorf("one-sender path, PUT: %d %q, want 405", r.status, r.body)
	}
	if r := send(t, s.front.URL, "127.0.0.2", "POST", one, "id=5", form...); r.status != 200 || r.body != "OK" {
		t.Errorf("one-sender path, its delivery: %d %q", r.status, r.body)
	}
	if n := len(s.runs(t, "shop-none")) + len(s.runs(t, "shop-5")); n != 1 {
		t.Errorf("the one-sender script ran %d times, want once (its own delivery only)", n)
	}

	// Counted by the configured path and logged at WARN with what the
	// requests looked like, never a value.
	if n := proxytest.Metric(t, s.ho.Registry, "hookonce_unmatched_total", "path", path, "action", "forwarded"); n != 2 {
		t.Errorf("hookonce_unmatched_total{path=%s,action=forwarded} = %v, want 2", path, n)
	}
	if n := proxytest.Metric(t, s.ho.Registry, "hookonce_unmatched_total", "path", one, "action", "refused"); n != 1 {
		t.Errorf("hookonce_unmatched_total{path=%s,action=refused} = %v, want 1 (the PUT)", one, n)
	}
	logs := s.ho.Logs.String()
	for _, want := range []string{`"level":"WARN"`, `"action":"forwarded"`, `"json_fields":"event,object,type"`,
		`"query_fields":"mdOrder,operation,orderNumber,status"`, `"method":"GET"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log has no %s:\n%s", want, logs)
		}
	}
	for _, secret := range []string{"2d6e1f93", "7b1c0e3a", "deposited"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log quotes a value (%s):\n%s", secret, logs)
		}
	}
}
