package proxy

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/contract"
)

// The claimed forward's request is built beside the delivery's, never in
// it: the delivery's headers and URL are what is stored with the claim,
// logged and judged, and must read the same after the forward. Its body
// is never replayable (trap 1): no GetBody, and a body even when empty
// (a nil one with an Idempotency-Key is resent by http.Transport).
func TestSiteCallRequestLeavesTheDeliveryAlone(t *testing.T) {
	site, _ := url.Parse("http://127.0.0.1:8080/base?site=1")
	sc := &siteCall{site: site, client: func(r *http.Request) (string, bool) { return "10.0.0.7", true }}
	for _, body := range []string{`{"id":"e1"}`, ""} {
		in, err := http.NewRequest(http.MethodPost, "http://shop.example/hooks/shop?a=1;b=%zz", nil)
		if err != nil {
			t.Fatal(err)
		}
		in.RemoteAddr = "127.0.0.1:5555"
		in.Header = http.Header{
			"Content-Type":      {"application/json"},
			"X-Forwarded-For":   {"10.0.0.7"},
			"X-Forwarded-Proto": {"https"},
			"Client-Ip":         {"10.9.9.9"},
			"Idempotency-Key":   {"forged"},
			"Idempotency_key":   {"forged"},
			"Transfer-Encoding": {"chunked"},
			"Expect":            {"100-continue"},
			"X-Many":            {"a", "b"},
		}
		header, u := in.Header.Clone(), *in.URL

		out := sc.request(context.Background(), in, []byte(body), "Idempotency-Key", "shop:e1")

		if !reflect.DeepEqual(in.Header, header) || *in.URL != u {
			t.Fatalf("the delivery's request changed: %v %v", in.Header, in.URL)
		}
		want := http.Header{
			"Content-Type":      {"application/json"},
			"X-Forwarded-For":   {"10.0.0.7, 127.0.0.1"},
			"X-Forwarded-Host":  {"shop.example"},
			"X-Forwarded-Proto": {"https"},
			"X-Real-Ip":         {"10.0.0.7"},
			"Idempotency-Key":   {"shop:e1"},
			"X-Many":            {"a", "b"},
			"User-Agent":        {""},
		}
		if !reflect.DeepEqual(out.Header, want) {
			t.Errorf("site's headers %v, want %v", out.Header, want)
		}
		if got := out.URL.String(); got != "http://127.0.0.1:8080/base/hooks/shop?site=1&a=1;b=%zz" {
			t.Errorf("site's URL %s", got)
		}
		if out.Host != "shop.example" || out.Context() != context.Background() {
			t.Errorf("Host %q, context %v", out.Host, out.Context())
		}
		if out.GetBody != nil || out.Body == nil || out.Body == http.NoBody || out.ContentLength != int64(len(body)) || out.TransferEncoding != nil {
			t.Fatalf("body %T, GetBody set %v, length %d, %v: replayable or mislabelled", out.Body, out.GetBody != nil, out.ContentLength, out.TransferEncoding)
		}
		if b, _ := io.ReadAll(out.Body); string(b) != body {
			t.Errorf("body %q, want %q", b, body)
		}
		// The values hookonce set are capped: appending to one (a
		// RoundTripper that adds a value) cannot reach another's.
		out.Header["X-Forwarded-Host"] = append(out.Header["X-Forwarded-Host"], "x")
		if out.Header.Get("X-Forwarded-Proto") != "https" || out.Header.Get("X-Real-Ip") != "10.0.0.7" {
			t.Errorf("an append to one header value changed another: %v", out.Header)
		}
	}
}

// dropHeader and dropClientAddrHeaders remove exactly what contract's
// DropHeader and DropClientAddrHeaders remove, for any name: ASCII in
// any case and spelling, non-ASCII letters that upper-case to ASCII ones
// (ı to I, ſ to S), bytes that are not UTF-8, names too long for the
// fast path.
func TestHeaderNamesAsContractReadsThem(t *testing.T) {
	names := []string{"", "Idempotency-Key", "idempotency_key", "IDEMPOTENCY-KEY", "Idempotency-Keys", "Idempotency Key",
		"X-Hook-Key", "X_Hook_Key", "x-hook-kEy", "X-Real-ıp", "X-Real-Ip", "X-Real-İp", "ſtripe-Key", "Stripe-Key", "STRIPE_KEY",
		"X-\xffKey", "X-\xffkey", "Ⅻ-Key", "ⅻ-Key", strings.Repeat("X-Long-", 12) + "Ip", strings.Repeat("x-long-", 12) + "ip",
		"Content-Type", "Content_Type"}
	names = append(names, contract.ClientAddrHeaders...)
	for _, a := range contract.ClientAddrHeaders {
		names = append(names, strings.ToLower(a), strings.ReplaceAll(a, "-", "_"), strings.Replace(a, "i", "ı", 1), a+"x")
	}
	full := http.Header{}
	for _, n := range names {
		full[n] = []string{"v"}
	}
	for _, name := range names {
		want, got := full.Clone(), full.Clone()
		contract.DropHeader(want, name)
		dropHeader(got, name)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("dropHeader(%q) left %d headers, contract.DropHeader %d", name, len(got), len(want))
		}
	}
	want, got := full.Clone(), full.Clone()
	contract.DropClientAddrHeaders(want)
	dropClientAddrHeaders(got)
	if !reflect.DeepEqual(got, want) {
		for k := range full {
			if _, g := got[k]; g != (want[k] != nil) {
				t.Errorf("%q: kept %v, contract keeps it %v", k, g, want[k] != nil)
			}
		}
	}
	if len(want) == len(full) {
		t.Fatal("contract.DropClientAddrHeaders dropped nothing: the test tests nothing")
	}

	// stripHopByHop: every header name the RFCs and servers use, in any
	// case, with and without a Connection list naming some of them.
	common := []string{"Accept", "Accept-Encoding", "Alt-Svc", "Cache-Control", "Connection", "Content-Encoding", "Content-Length",
		"Content-Type", "Cookie", "Date", "Expect", "Forwarded", "Host", "Http2-Settings", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Proxy-Connection", "Set-Cookie", "Te", "Trailer", "Trailers", "Transfer-Encoding", "Upgrade",
		"Upgrade-Insecure-Requests", "Via", "Warning", "X-Drop", "X-Drop-Too", "keep-alive", "transfer-encoding", "Transfer_Encoding"}
	for _, conn := range [][]string{nil, {"close"}, {"keep-alive, X-Drop", " x-drop-too ,Via"}, {"", ","}} {
		h := http.Header{}
		for _, n := range common {
			h[n] = []string{"v"}
		}
		if conn != nil {
			h["Connection"] = conn
		}
		want, got := h.Clone(), h.Clone()
		contract.StripHopByHop(want)
		stripHopByHop(got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Connection %q: stripHopByHop left %v, contract.StripHopByHop %v", conn, got, want)
		}
		if len(want) == len(h) {
			t.Fatal("contract.StripHopByHop stripped nothing: the test tests nothing")
		}
	}
}
