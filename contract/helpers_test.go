package contract_test

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/contract"
)

// sigRequest is a delivery with only headers and a body, for signature
// checks that read nothing else.
func sigRequest(h http.Header, body []byte) *contract.Request {
	return &contract.Request{Method: http.MethodPost, Path: "/", Header: h, Body: body}
}

// keyRequest wraps an http.Request whose body is body.
func keyRequest(r *http.Request, body []byte) *contract.Request {
	return contract.NewRequest(r, r.URL.Path, body, netip.Addr{})
}

// delivery builds a request as the proxy would: target is the path and
// query, ctype the body's Content-Type ("" for none), client the sender's
// address ("" for unknown), kv extra headers.
func delivery(t testing.TB, method, target, ctype, body, client string, kv ...string) *contract.Request {
	t.Helper()
	r, err := http.NewRequest(method, "http://shop.example"+target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Add(kv[i], kv[i+1])
	}
	var addr netip.Addr
	if client != "" {
		addr = netip.MustParseAddr(client)
	}
	return contract.NewRequest(r, r.URL.Path, []byte(body), addr)
}

const formType = "application/x-www-form-urlencoded"
