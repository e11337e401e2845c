package contract_test

import (
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/hookonce/hookonce/contract"
)

// Parse a config with two payment systems on one 1C-Bitrix script, then
// route a request the way the site would run it.
func ExampleParse() {
	c, err := contract.Parse([]byte(`
senders:
  - name: robokassa
    match:
      path: /bitrix/tools/sale_ps_result.php
      when: [ { form: SHP_HANDLER, equals: ROBOXCHANGE } ]
    key: [ { form: InvId } ]
  - name: yookassa
    match:
      path: /bitrix/tools/sale_ps_result.php
      when: [ { body: object.metadata.BX_HANDLER, equals: YANDEX_CHECKOUT } ]
    key: [ { body: object.id }, { body: event } ]
`), "hookonce.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	path, _ := contract.NormalizePath("//bitrix/tools/./sale_ps_result.php/x")
	body := "InvId=77&OutSum=10.00&SHP_HANDLER=ROBOXCHANGE&InvId=78"
	r := httptest.NewRequest("POST", "/bitrix/tools/sale_ps_result.php", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req := contract.NewRequest(r, path, []byte(body), c.ClientAddr(r.RemoteAddr, r.Header))
	choice := c.Route(path).Select(req) // file order, first whose conditions hold
	key, _ := choice.Sender.Key(req)    // PHP reads the last InvId
	fmt.Println(path)
	fmt.Println(choice.Sender.Name, key)

	_, err = contract.Parse([]byte("senders:\n  - {name: bad, match: {path: /x}}\n"), "hookonce.yaml")
	fmt.Println(err)
	// Output:
	// /bitrix/tools/sale_ps_result.php/x
	// robokassa 78
	// hookonce.yaml:2: sender "bad": field key: required: at least one of header, body, query, form or request (or a preset that sets it)
}
