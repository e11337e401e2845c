package contract_test

import (
	"net/http"
	"net/netip"

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
