package contract_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

// BenchmarkInspectUnmatched: what judging a request no sender takes
// costs on the README's Bitrix path (a YooKassa notification the shop's
// own dispatch handles): every sender's conditions, and the border check
// of the signed senders that missed it.
func BenchmarkInspectUnmatched(b *testing.B) {
	b.Setenv("ROBOKASSA_PASSWORD2", "robo-pass-2")
	b.Setenv("TBANK_PASSWORD", "tbank-pass")
	const p = "/bitrix/tools/sale_ps_result.php"
	c, err := contract.Parse([]byte(`
senders:
  - name: robokassa
    preset: robokassa
    match: { path: `+p+`, when: [ { request: SHP_HANDLER, equals: ROBOXCHANGE } ] }
    signature: { secret_env: ROBOKASSA_PASSWORD2 }
  - name: tbank
    preset: tbank
    match: { path: `+p+`, when: [ { body: TerminalKey, present: true } ] }
    signature: { secret_env: TBANK_PASSWORD }
`), "bitrix.yaml")
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"type":"notification","event":"payment.succeeded","object":{"id":"2d6e","metadata":{"BX_HANDLER":"YANDEX_CHECKOUT"}}}`)
	rt := c.Route(p)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		r, _ := http.NewRequest("POST", "http://shop.example"+p, strings.NewReader(""))
		r.RemoteAddr = "192.0.2.1:4000"
		r.Header.Set("Content-Type", "application/json")
		in := c.Inspect(rt, r, p, body, now)
		if in.Choice.Sender != nil || in.Choice.Undecided != nil {
			b.Fatal(in.Choice)
		}
	}
}
