package oneshot

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"testing"
)

// sizedBody is a body read whole, as hookonce's forward sends it: a
// bytes.Reader that closes.
type sizedBody struct{ bytes.Reader }

func (*sizedBody) Close() error { return nil }

// writeRequest writes what Request.Write writes, or leaves the request
// to it with nothing written: hosts, targets, header names and values,
// the User-Agent, Connection: close, bodies, with and without the
// oddities Request.Write rewrites, drops or refuses.
func TestWriteRequestAsRequestWrite(t *testing.T) {
	type tc struct {
		method, host, target string
		header               http.Header
		body                 string
		close                bool
		trailer              http.Header
		trace                bool
		plainBody            bool // a body without Len
	}
	base := http.Header{
		"User-Agent": {""}, "Content-Type": {"application/json"}, "X-Forwarded-For": {"10.0.0.1, 127.0.0.1"},
		"X-Many": {"a", "b", ""}, "Idempotency-Key": {"shop:evt_1"}, "X-Empty": {}, "Accept": {"*/*"},
	}
	with := func(kv ...string) http.Header {
		h := base.Clone()
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = []string{kv[i+1]}
		}
		return h
	}
	without := func(k string) http.Header { h := base.Clone(); delete(h, k); return h }
	body := `{"id":"evt_1"}`
	cases := []tc{
		{method: "POST", host: "shop.example", target: "/hooks/shop", header: base, body: body},
		{method: "POST", host: "shop.example", target: "/hooks/shop", header: base, body: body, close: true},
		{method: "PUT", host: "127.0.0.1:8080", target: "/a/b?x=1&y=%zz;z", header: base, body: body},
		{method: "POST", host: "[::1]:8080", target: "/", header: base, body: strings.Repeat("x", 70<<10)},
		{method: "POST", host: "a_b-c.example", target: "/p%20q", header: base, body: body},
		{method: "POST", host: "", target: "/from-url", header: base, body: body},
		{method: "POST", host: "shop.example", target: "/", header: with("User-Agent", "Stripe/1.0 (+https://stripe.com)"), body: body},
		{method: "POST", host: "shop.example", target: "/", header: with("X-Key", "shop:a\nb"), body: body},
		{method: "POST", host: "shop.example", target: "/", header: with("X-Key", "shop:a\rb"), body: body},
		{method: "POST", host: "shop.example", target: "/", header: with("X-Key", " padded\t"), body: body},
		{method: "POST", host: "shop.example", target: "/", header: with("User-Agent", " ua "), body: body},
		{method: "POST", host: "shop.example", target: "/", header: with("Bad Name", "v"), body: body},
		{method: "POST", host: "shop.example", target: "/", header: with("X-Ünicode", "v"), body: body},
		{method: "POST", host: "shop.example", target: "/", header: with("X-Value", "ünicode ok"), body: body},
		{method: "POST", host: "shop.example", target: "/", header: with("Connection", "close"), body: body, close: true},
		{method: "POST", host: "shop.example", target: "/", header: with("Connection", "keep-alive"), body: body},
		{method: "POST", host: "shop.example", target: "/", header: with("Host", "other.example", "Content-Length", "9", "Transfer-Encoding", "chunked", "Trailer", "X-T"), body: body},
		{method: "POST", host: "shop.example", target: "/", header: without("User-Agent"), body: body},
		{method: "POST", host: "shop.example", target: "/", header: base, body: ""},
		{method: "GET", host: "shop.example", target: "/", header: base, body: ""},
		{method: "POST", host: "shop.example", target: "/", header: base, body: body, trailer: http.Header{"X-T": {"1"}}},
		{method: "POST", host: "shop.example", target: "/", header: base, body: body, trace: true},
		{method: "POST", host: "shop.example", target: "/", header: base, body: body, plainBody: true},
		{method: "POST", host: "bücher.example", target: "/", header: base, body: body},
		{method: "POST", host: "[fe80::1%25eth0]:80", target: "/", header: base, body: body},
		{method: "POST", host: "bad host", target: "/", header: base, body: body},
		{method: "POST", host: "shop.example", target: "/a\x7fb", header: base, body: body},
		{method: "POST", host: "shop.example", target: "/a\tb", header: base, body: body},
		{method: "CONNECT", host: "shop.example:443", target: "", header: base, body: body},
		{method: "", host: "shop.example", target: "/", header: base, body: body},
	}
	handledN := 0
	for i, c := range cases {
		build := func() *http.Request {
			u := &url.URL{Scheme: "http", Host: "127.0.0.1:9999", Opaque: ""}
			if c.target != "" {
				pu, err := url.ParseRequestURI(c.target)
				if err != nil {
					u.Path = c.target
				} else {
					u.Path, u.RawPath, u.RawQuery = pu.Path, pu.RawPath, pu.RawQuery
				}
			}
			ctx := context.Background()
			if c.trace {
				ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() {}})
			}
			r := (&http.Request{Method: c.method, URL: u, Host: c.host, Header: c.header, Close: c.close, Trailer: c.trailer,
				ContentLength: int64(len(c.body))}).WithContext(ctx)
			if c.body != "" {
				b := &sizedBody{}
				b.Reset([]byte(c.body))
				r.Body = b
				if c.plainBody {
					r.Body = io.NopCloser(strings.NewReader(c.body))
				}
			}
			return r
		}
		var want, got bytes.Buffer
		wantErr := build().Write(&want)
		bw := bufio.NewWriterSize(&got, 4<<10)
		handled, err := writeRequest(bw, build())
		if !handled {
			if bw.Buffered() != 0 || got.Len() != 0 || err != nil {
				t.Errorf("case %d: not handled, yet wrote %d bytes (%v)", i, bw.Buffered()+got.Len(), err)
			}
			continue
		}
		handledN++
		if ferr := bw.Flush(); err == nil {
			err = ferr
		}
		if (err == nil) != (wantErr == nil) || got.String() != want.String() {
			t.Errorf("case %d (%s %q %q):\n got %q (%v)\nwant %q (%v)", i, c.method, c.host, c.target, got.String(), err, want.String(), wantErr)
		}
	}
	if handledN < 8 {
		t.Fatalf("only %d cases written by writeRequest: the forward's shape falls back", handledN)
	}
}
