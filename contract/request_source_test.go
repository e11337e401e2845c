package contract_test

import (
	"testing"

	"github.com/hookonce/hookonce/contract"
)

// TestRequestSource checks FromRequest against PHP's array_merge($_GET,
// $_POST): a form name replaces the query's entry of that name. Where
// $_REQUEST reads a name otherwise (an array in both, which $_REQUEST
// merges; an integer name, which array_merge renumbers), the name is
// refused rather than read one way.
func TestRequestSource(t *testing.T) {
	req := delivery(t, "POST", "/x?a=q&b[x]=1&c=1&only=q", formType, "a=f&b=2&c[z]=3", "")
	for name, want := range map[string]string{"a": "f", "only": "q", "b": "2", "c[z]": "3"} {
		if v, ok, err := req.Value(contract.FromRequest, name); err != nil || !ok || v != want {
			t.Errorf("request %s = %q %v %v, want %q", name, v, ok, err, want)
		}
	}
	if _, ok, _ := req.Value(contract.FromRequest, "b[x]"); ok {
		t.Error("b[x] survived a form b: the form's entry replaces it")
	}
	fields, err := req.Fields(contract.FromRequest)
	if err != nil || len(fields) != 4 || fields["c[z]"] != "3" {
		t.Errorf("request fields = %v, %v", fields, err)
	}
	amb := delivery(t, "POST", "/x?b[x]=1&InvId=7&5=x", formType, "b[z]=3", "")
	for _, name := range []string{"b[x]", "b[z]", "5"} {
		if _, _, err := amb.Value(contract.FromRequest, name); err == nil {
			t.Errorf("request %s: read one way where $_REQUEST and $request->get() differ", name)
		}
	}
	if v, ok, err := amb.Value(contract.FromRequest, "InvId"); err != nil || !ok || v != "7" {
		t.Errorf("request InvId = %q %v %v beside an ambiguous name; want 7", v, ok, err)
	}
	if _, err := amb.Fields(contract.FromRequest); err == nil {
		t.Error("all request fields read one way where two names are ambiguous")
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
