package contract_test

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

// TestWooCommerceDocConfig: the example in docs/woocommerce.md parses, and
// routes as the page says: a gateway callback with wc-api reaches its
// sender in every spelling WooCommerce runs its handler for, on any URL;
// the shop's pages and other wc-api values go to the site untouched.
func TestWooCommerceDocConfig(t *testing.T) {
	doc, err := os.ReadFile("../docs/woocommerce.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(doc), "```yaml\nsite:")
	if start < 0 {
		t.Fatal("docs/woocommerce.md has no example config starting with site:")
	}
	yaml := string(doc)[start+len("```yaml\n"):]
	yaml = yaml[:strings.Index(yaml, "```")]
	for _, env := range []string{"ROBOKASSA_PASSWORD2", "MYGATEWAY_SECRET", "WC_WEBHOOK_SECRET"} {
		t.Setenv(env, "x")
	}
	c, err := contract.Parse([]byte(yaml), "woocommerce.md")
	if err != nil {
		t.Fatalf("the example does not parse: %v", err)
	}
	for _, tc := range []struct {
		method, target, body string
		sender               string // "" for none: the site's own traffic
	}{
		{"POST", "/?wc-api=robokassa_result", "OutSum=10.00&InvId=5&SignatureValue=x", "robokassa"},
		{"GET", "/?wc-api=ROBOKASSA_RESULT&OutSum=10.00&InvId=5&SignatureValue=x", "", "robokassa"},
		{"POST", "/index.php?wc-api=wc_gateway_mygateway", "transaction_id=7", "mygateway"},
		{"POST", "/?wc-api=robokassa_result%21", "OutSum=10.00&InvId=5&SignatureValue=x", "robokassa"},
		{"POST", "/shop/?wc-api=robokassa_result%0a", "OutSum=10.00&InvId=5&SignatureValue=x", "robokassa"},
		{"POST", "/shop/", "wc-api=robokassa_result&OutSum=10.00&InvId=5&SignatureValue=x", "robokassa"},
		{"GET", "/wc-api/robokassa_result/?OutSum=10.00&InvId=5&SignatureValue=x", "", "robokassa"},
		{"GET", "/", "", ""},
		{"GET", "/shop/cart/", "", ""},
		{"GET", "/?p=42", "", ""},
		{"POST", "/?wc-api=wc_gateway_other", "x=1", ""},
		{"POST", "/wc-hooks/receive.php", `{"id":1}`, "wc-webhooks"},
	} {
		r, _ := http.NewRequest(tc.method, "http://shop.example"+tc.target, strings.NewReader(tc.body))
		if tc.body != "" && !strings.HasPrefix(tc.body, "{") {
			r.Header.Set("Content-Type", formType)
		}
		path, rt, err := c.Locate(r.URL.EscapedPath())
		if err != nil || rt == nil {
			t.Errorf("%s %s: route %v %v", tc.method, tc.target, rt, err)
			continue
		}
		in := c.Inspect(rt, r, path, []byte(tc.body), time.Now())
		got := ""
		if in.Choice.Sender != nil {
			got = in.Choice.Sender.Name
		}
		if got != tc.sender {
			t.Errorf("%s %s: sender %q, want %q", tc.method, tc.target, got, tc.sender)
		}
		if got == "" && rt.Unmatched != contract.UnmatchedPass {
			t.Errorf("%s %s: no sender takes it and the path refuses it (unmatched %s)", tc.method, tc.target, rt.Unmatched)
		}
	}
}
