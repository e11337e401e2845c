package contract

import (
	"fmt"
	"net/http"
	"testing"
)

// A form's changed fields are named as PHP names them, read with PHP's
// rules (the last of a repeated field, bracket names nested), never with
// their values; JSON bodies get JSON paths; anything else nothing.
func TestChangedBody(t *testing.T) {
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	multi := http.Header{"Content-Type": {"multipart/form-data; boundary=XX"}}
	mp := func(fields ...string) []byte {
		s := ""
		for i := 0; i+1 < len(fields); i += 2 {
			s += "--XX\r\nContent-Disposition: form-data; name=\"" + fields[i] + "\"\r\n\r\n" + fields[i+1] + "\r\n"
		}
		return []byte(s + "--XX--\r\n")
	}
	for _, tc := range []struct {
		name          string
		aMethod       string
		aHeader       http.Header
		a             string
		bHeader       http.Header
		b             string
		kind, changed string
	}{
		{"form amount", "POST", form, "OrderId=1&Amount=100&Status=CONFIRMED", form, "OrderId=1&Amount=200&Status=CONFIRMED", DiffForm, "[Amount]"},
		{"form repeated field: the last counts", "POST", form, "a=1&a=2", form, "a=2", DiffForm, "[]"},
		{"form nested and added", "POST", form, "data[FIELDS][ID]=7&x=1", form, "data[FIELDS][ID]=8&x=1&y=2", DiffForm, "[data[FIELDS][ID] y]"},
		{"form field removed", "POST", form, "a=1&b=2", form, "a=1", DiffForm, "[b]"},
		{"multipart", "POST", multi, string(mp("OrderId", "1", "Amount", "100")), multi, string(mp("OrderId", "2", "Amount", "100")), DiffForm, "[OrderId]"},
		{"json", "POST", http.Header{}, `{"a":1,"b":{"c":2}}`, http.Header{}, `{"a":1,"b":{"c":3}}`, DiffJSON, "[b.c]"},
		{"json against a form", "POST", http.Header{}, `{"a":1}`, form, "a=1", "", "[]"},
		{"plain text", "POST", http.Header{}, "hello", http.Header{}, "world", "", "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, changed := ChangedBody(tc.aMethod, tc.aHeader, []byte(tc.a), "POST", tc.bHeader, []byte(tc.b))
			if kind != tc.kind || fmt.Sprint(changed) != tc.changed {
				t.Fatalf("ChangedBody = %q %v, want %q %s", kind, changed, tc.kind, tc.changed)
			}
		})
	}
}
