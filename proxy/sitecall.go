package proxy

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/hookonce/hookonce/proxy/internal/oneshot"
)

// siteCall is the claimed delivery's forward: it builds the request the
// site gets, sends it once through its RoundTripper, and reads the answer
// into a capture. It does what an httputil.ReverseProxy with the
// pass-through's Rewrite did on this path (the site's URL, the client's
// address, hop-by-hop headers, the forward key header), without the
// request's second copy, the answer's header copy, the 1xx and flush
// plumbing a capture never uses. TestClaimedForwardWire holds it to the
// bytes that ReverseProxy sent and answered.
type siteCall struct {
	site *url.URL
	rt   http.RoundTripper
	// direct: rt is oneshot's, which says how far a request got in its
	// errors (oneshot.SendError); any other RoundTripper is traced.
	direct bool
	// client is the address hookonce judged for a request, and whether it
	// came from a trusted proxy (trap 23).
	client func(r *http.Request) (addr string, trusted bool)
}

// siteRequest holds, in one allocation, what a forward's request needs
// beside the request itself: its URL, its body's reader, and the values
// of the headers hookonce sets.
type siteRequest struct {
	url  url.URL
	body sentBody
	vals headerVals
}

// sentBody is the delivery's body, read whole, as the request's body. It
// has no GetBody and is never rewound: the forward is not replayable
// (trap 1).
type sentBody struct{ bytes.Reader }

func (*sentBody) Close() error { return nil }

// forward sends in (its body read whole into body) to the site once under
// ctx and reads the answer into c; a failure is c's error. keyHeader, when
// set, carries keyValue to the site: set after hop-by-hop headers are
// removed, so a sender's "Connection: Idempotency-Key" cannot strip it,
// and after any header a PHP site reads under that name is dropped (a
// client's own, in any spelling).
func (sc *siteCall) forward(ctx context.Context, in *http.Request, body []byte, keyHeader, keyValue string, c *capture) {
	res, err := sc.rt.RoundTrip(sc.request(ctx, in, body, keyHeader, keyValue))
	if err != nil {
		c.setErr(err)
		return
	}
	c.read(res)
}

// request builds the request the site gets. in is not changed: the
// outgoing request is a shallow copy of it whose URL, headers and body
// are its own (header values are shared, never appended to).
func (sc *siteCall) request(ctx context.Context, in *http.Request, body []byte, keyHeader, keyValue string) *http.Request {
	sr := new(siteRequest)
	out := in.WithContext(ctx)
	sr.url = siteURL(sc.site, in.URL)
	out.URL = &sr.url
	out.Host = in.Host // legacy sites route by virtual host

	h := make(http.Header, len(in.Header)+6)
	for k, vs := range in.Header {
		h[k] = vs
	}
	// Inspect removed them from in already (trap 28), but CGI's folding of
	// spellings can bring a name back (Transfer_Encoding is
	// Transfer-Encoding to PHP): the forward removes them again, as a
	// proxy hop does. No upgrade is asked for: a webhook is not switched
	// to another protocol, and Inspect leaves no Connection header to ask
	// with.
	stripHopByHop(h)
	if hasToken(in.Header["Te"], "trailers") {
		sr.vals.set(h, "Te", "trailers")
	}
	for _, k := range forwardedNames {
		delete(h, k)
	}
	sc.clientHeaders(h, in, &sr.vals)
	delete(h, "Expect")
	if keyHeader != "" {
		dropHeader(h, keyHeader) // a client's, under any spelling
		sr.vals.set(h, http.CanonicalHeaderKey(keyHeader), keyValue)
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = noUserAgent // Request.Write sends none, not Go's
	}
	out.Header = h

	if len(body) == 0 {
		// A body of no bytes the transport cannot rewind: a nil body with
		// an Idempotency-Key is replayable to http.Transport (trap 1).
		out.Body = emptyBody{}
	} else {
		sr.body.Reset(body)
		out.Body = &sr.body
	}
	out.ContentLength = int64(len(body))
	// A chunked delivery goes with Content-Length: Apache's
	// mod_proxy_fcgi gives php-fpm no CONTENT_LENGTH for a chunked
	// request, and PHP then reads an empty body where hookonce judged the
	// one it read (#33).
	out.TransferEncoding = nil
	out.GetBody = nil // trap 1
	out.Close = false
	return out
}

// forwardedNames are the X-Forwarded-* headers a sender's request may not
// bring to the site: hookonce sets its own (clientHeaders).
var forwardedNames = [...]string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}

// noUserAgent is the User-Agent value that makes Request.Write send none.
var noUserAgent = []string{""}[:1:1]

// clientHeaders sets in h what the site learns the client's address from,
// from hookonce alone (trap 23): every header a site or a PHP library
// reads it from is dropped, then X-Real-IP and X-Forwarded-For say the
// address hookonce judged — the peer, or from a trusted proxy (the site's
// own nginx) the client that proxy reported — followed in X-Forwarded-For
// by the trusted proxy itself. vals may be nil.
func (sc *siteCall) clientHeaders(h http.Header, in *http.Request, vals *headerVals) {
	addr, fromTrusted := sc.client(in)
	dropClientAddrHeaders(h)
	if ip, _, err := net.SplitHostPort(in.RemoteAddr); err == nil {
		if fromTrusted && addr != ip {
			ip = addr + ", " + ip
		}
		vals.set(h, "X-Forwarded-For", ip)
	} else {
		delete(h, "X-Forwarded-For")
	}
	host, proto := in.Host, "http"
	if in.TLS != nil {
		proto = "https"
	}
	if fromTrusted {
		if v := in.Header.Get("X-Forwarded-Host"); v != "" {
			host = v
		}
		if v := in.Header.Get("X-Forwarded-Proto"); v != "" {
			proto = v
		}
	}
	vals.set(h, "X-Forwarded-Host", host)
	vals.set(h, "X-Forwarded-Proto", proto)
	vals.set(h, "X-Real-Ip", addr)
}

// headerVals hands out one-value header slices from one array, so that
// the headers a forward sets cost no allocation each. A nil *headerVals
// allocates each.
type headerVals struct {
	a [6]string
	n int
}

// set sets header k (in canonical form) to the one value v.
func (hv *headerVals) set(h http.Header, k, v string) {
	if hv == nil || hv.n == len(hv.a) {
		h[k] = []string{v}
		return
	}
	hv.a[hv.n] = v
	h[k] = hv.a[hv.n : hv.n+1 : hv.n+1] // capped: an append copies
	hv.n++
}

// siteURL is the URL of in's request at site: site's scheme and host,
// site's path joined with in's, and in's query as it came (after site's
// own query, if any). net/url cannot parse a query with a stray "%" or
// ";", and re-encoding it would drop and reorder fields: the site would
// read another query than the one judged.
func siteURL(site, in *url.URL) url.URL {
	u := *in
	u.Scheme, u.Host = site.Scheme, site.Host
	u.Path, u.RawPath = joinPath(site, in)
	switch {
	case site.RawQuery == "":
	case in.RawQuery == "":
		u.RawQuery = site.RawQuery
	default:
		u.RawQuery = site.RawQuery + "&" + in.RawQuery
	}
	return u
}

// joinPath joins site's path and in's with one slash between them,
// keeping an escaped form (RawPath) when either has one.
func joinPath(site, in *url.URL) (path, rawPath string) {
	if site.RawPath == "" && in.RawPath == "" {
		return joinSlash(site.Path, in.Path), ""
	}
	ep, ip := site.EscapedPath(), in.EscapedPath()
	switch a, b := strings.HasSuffix(ep, "/"), strings.HasPrefix(ip, "/"); {
	case a && b:
		return site.Path + in.Path[1:], ep + ip[1:]
	case !a && !b:
		return site.Path + "/" + in.Path, ep + "/" + ip
	}
	return site.Path + in.Path, ep + ip
}

func joinSlash(a, b string) string {
	switch x, y := strings.HasSuffix(a, "/"), strings.HasPrefix(b, "/"); {
	case x && y:
		return a + b[1:]
	case !x && !y:
		return a + "/" + b
	}
	return a + b
}

// hasToken reports whether a comma-separated list in vs holds token
// (ASCII case-insensitively).
func hasToken(vs []string, token string) bool {
	for _, v := range vs {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.Trim(f, " \t"), token) {
				return true
			}
		}
	}
	return false
}

// errSwitched: the site answered 101 Switching Protocols. It had the
// request, so the outcome is ambiguous (trap 31), never unreachable.
var errSwitched = errors.New("the site answered 101 Switching Protocols to a webhook")

// isOneShot reports whether rt is oneshot's RoundTripper.
func isOneShot(rt http.RoundTripper) bool {
	_, ok := rt.(*oneshot.Transport)
	return ok
}
