package contract_test

import (
	"testing"

	"github.com/hookonce/hookonce/contract"
)

// TestRequestSource checks FromRequest against PHP's array_merge($_GET,
// $_POST): a form name replaces the query's whole entry of that name.
func TestRequestSource(t *testing.T) {
	req := delivery(t, "POST", "/x?a=q&b[x]=1&b[y]=2&only=q", formType, "a=f&b[z]=3", "")
	for name, want := range map[string]string{"a": "f", "only": "q", "b[z]": "3"} {
		if v, ok, err := req.Value(contract.FromRequest, name); err != nil || !ok || v != want {
			t.Errorf("request %s = %q %v %v, want %q", name, v, ok, err, want)
		}
	}
	if _, ok, _ := req.Value(contract.FromRequest, "b[x]"); ok {
		t.Error("b[x] survived a form b[…]: array_merge replaces the whole entry")
	}
	fields, err := req.Fields(contract.FromRequest)
	if err != nil || len(fields) != 3 || fields["b[z]"] != "3" {
		t.Errorf("request fields = %v, %v", fields, err)
	}
	get := delivery(t, "GET", "/x?a=q", "application/json", `{"a":"json"}`, "")
	if v, _, _ := get.Value(contract.FromRequest, "a"); v != "q" {
		t.Errorf("a JSON body is not a form: request a = %q, want the query's", v)
	}
	body := delivery(t, "POST", "/x", "application/json", `{"s":"x","n":1.50,"t":true,"f":false,"z":null,"o":{"a":1},"l":[1],"s":"last"}`, "")
	got, err := body.Fields(contract.FromBody)
	want := map[string]string{"s": "last", "n": "1.5", "t": "true", "f": "false"}
	if err != nil || len(got) != len(want) {
		t.Fatalf("body fields = %v, %v; want %v", got, err, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("body field %s = %q, want %q", k, got[k], v)
		}
	}
	if _, err := delivery(t, "POST", "/x", "application/json", `[1]`, "").Fields(contract.FromBody); err == nil {
		t.Error("a JSON array has no fields")
	}
}
