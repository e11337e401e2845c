package contract

import (
	"fmt"
	"testing"
)

var sprintf = fmt.Sprintf

// The rules tag changes with the rules that decide a delivery's outcome,
// not with the mode or a timeout, and is the same for the same file.
func TestRulesTag(t *testing.T) {
	tag := func(yaml string) string {
		t.Helper()
		ct, err := Parse([]byte(yaml), "t.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return ct.Senders[0].RulesTag()
	}
	base := `
senders:
  - name: shop
    mode: %s
    match: { path: /hooks/shop, when: [ { body: type, matches: "^pay" } ] }
    key: [ { body: %s } ]
    upstream_timeout: %s
    success: { status: 200 }
`
	a := tag(sprintf(base, "shadow", "id", "10s"))
	if len(a) != 8 || a != tag(sprintf(base, "shadow", "id", "10s")) {
		t.Fatalf("tag %q is not a stable 8-digit tag", a)
	}
	if b := tag(sprintf(base, "enforce", "id", "20s")); b != a {
		t.Errorf("mode and timeout changed the tag: %s → %s", a, b)
	}
	if c := tag(sprintf(base, "shadow", "orderId", "10s")); c == a {
		t.Errorf("another key kept the tag %s", a)
	}
}
