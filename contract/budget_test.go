package contract_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/contract"
)

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func jsonArray(elem string, size int) string {
	var b strings.Builder
	b.WriteByte('[')
	for b.Len() < size-len(elem)-2 {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(elem)
	}
	b.WriteByte(']')
	return b.String()
}

func nestedForm(fields, depth int) string {
	var parts []string
	for i := range fields {
		parts = append(parts, fmt.Sprintf("f%d%s=1", i, strings.Repeat("[a]", depth)))
	}
	return strings.Join(parts, "&")
}

// TestBoundedWorkBeforeTrust: what anyone who reaches the port can make
// hookonce build before a signature holds. The bound is on bytes
// allocated per inspection, beside the body already read; before these
// limits a 1 MiB [0,0,…] cost ~38 MiB and a 133 KB nested form 21 MiB.
func TestBoundedWorkBeforeTrust(t *testing.T) {
	t.Setenv("BUDGET_SECRET", "whsec_budget")
	c, err := contract.Parse([]byte(`
senders:
  - name: stripe
    preset: stripe
    match: { path: /stripe.php }
    signature: { secret_env: BUDGET_SECRET }
  - name: routed
    match: { path: /routed.php, when: [ { body: type, equals: payment } ] }
    key: [ { body: data.id } ]
    hash: json
  - name: robokassa
    preset: robokassa
    match: { path: /rk.php }
    signature: { secret_env: BUDGET_SECRET }
`), "budget.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	cases := []struct {
		name, path, ctype, body string
		limit                   uint64 // bytes allocated, beyond the body
		unreadable              bool
	}{
		{"numbers", "/stripe.php", "application/json", jsonArray("0", mib), 64 << 10, false},
		{"empty objects", "/stripe.php", "application/json", jsonArray("{}", mib), 64 << 10, false},
		{"empty arrays", "/stripe.php", "application/json", jsonArray("[]", mib), 64 << 10, false},
		// Routing reads the body of an unsigned request: a walk, no decode.
		{"routed numbers", "/routed.php", "application/json", `{"type":"payment","pad":` + jsonArray("0", mib-40) + `,"data":{"id":"x"}}`, 256 << 10, false},
		{"nested form", "/rk.php", "application/x-www-form-urlencoded", nestedForm(1000, 64), 3 << 20, true},
		{"wide form", "/rk.php", "application/x-www-form-urlencoded", nestedForm(1000, 0) + "&" + strings.Repeat("x=1&", 200000), 3 << 20, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			var in contract.Inspection
			n := allocated(func() {
				r := httptest.NewRequest("POST", tc.path, bytes.NewReader(body))
				r.Header.Set("Content-Type", tc.ctype)
				path, rt, err := c.Locate(tc.path)
				if err != nil || rt == nil {
					t.Fatalf("no route: %v", err)
				}
				in = c.Inspect(rt, r, path, body, time.Now())
			})
			if got := errors.Is(in.BodyErr, contract.ErrUnreadableBody); got != tc.unreadable {
				t.Fatalf("refused as unreadable: %v (%v), want %v", got, in.BodyErr, tc.unreadable)
			}
			if n > tc.limit {
				t.Errorf("inspecting %d bytes allocated %d KiB, bound %d KiB", len(body), n>>10, tc.limit>>10)
			}
			t.Logf("%d bytes: %d KiB allocated", len(body), n>>10)
		})
	}
}
