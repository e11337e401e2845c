package contract

import (
	"net/http"
	"net/netip"
	"net/textproto"
	"slices"
	"strings"
)

// The request the site gets is the request hookonce judges: the headers
// that do not survive a proxy hop are removed before anything is read, and
// the headers a site reads the client's address from say the address
// hookonce judged (trap 23 in ARCHITECTURE.md).

// hopHeaders are removed by every proxy hop (RFC 9110 7.6.1), as Go's
// ReverseProxy removes them, besides the headers Connection names. Each is
// written in its canonical form (TestHopHeadersCanonical).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// StripHopByHop removes from h the headers the forward to the site will
// not carry: those named in Connection and the hop-by-hop ones. Run before
// a request is judged, it makes the judged headers the forwarded ones: a
// `Connection: X-Signature` cannot have the signature checked and then
// dropped on the way to the site.
func StripHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k) // canonical already: h.Del would canonicalise each
	}
}

// ClientAddrHeaders are the request headers that PHP sites, their
// libraries and their web servers read a client's address from, besides
// REMOTE_ADDR. hookonce never passes a sender's own value of any of them:
// the site gets X-Real-IP and X-Forwarded-For naming the address hookonce
// judged, and none of the others. A name is matched case-insensitively
// and with "_" for "-" (PHP's $_SERVER['HTTP_CLIENT_IP'] is both
// Client-IP and Client_IP).
var ClientAddrHeaders = []string{
	"Client-Ip", "Cf-Connecting-Ip", "Fastly-Client-Ip", "Forwarded",
	"Forwarded-For", "True-Client-Ip", "X-Client-Ip", "X-Cluster-Client-Ip",
	"X-Coming-From", "X-Forwarded", "X-Forwarded-Client-Ip", "X-Forwarded-For",
	"X-Original-Forwarded-For", "X-Originating-Ip", "X-Proxyuser-Ip",
	"X-Real-Ip", "X-Remote-Addr", "X-Remote-Ip", "Wl-Proxy-Client-Ip",
}

var clientAddrEnv = func() map[string]bool {
	m := make(map[string]bool, len(ClientAddrHeaders))
	for _, h := range ClientAddrHeaders {
		m[envName(h)] = true
	}
	return m
}()

// envName is a header's name as CGI and PHP's $_SERVER spell it, without
// the HTTP_ prefix.
func envName(h string) string {
	return strings.ToUpper(strings.ReplaceAll(h, "-", "_"))
}

// CGIHeader returns h as a PHP site's headers are named: CGI (php-fpm
// behind nginx or Apache, php -S) turns every header name into
// HTTP_<NAME> with "-" and "_" alike, so X-Signature and X_Signature are
// one variable there, the last one sent winning. In the result each
// header is kept under its name with "_" read as "-", and spellings that
// CGI merges are merged into one header with all their values: a key or
// signature part sent under two spellings is a header sent more than
// once (absent, as any repeated header is), and one sent only as
// X_Event_Id is read where the site reads it. Inspect forwards the
// result, so the site gets every header under the name it was judged by
// (nginx drops names with "_" unless underscores_in_headers is on; a
// "-" name reaches PHP on every server). h is returned as it is when no
// name has a "_", the common case.
func CGIHeader(h http.Header) http.Header {
	var names []string
	for k := range h {
		if strings.IndexByte(k, '_') >= 0 {
			names = append(names, k)
		}
	}
	if names == nil {
		return h
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		if strings.IndexByte(k, '_') < 0 {
			out[k] = append(out[k], vs...)
		}
	}
	slices.Sort(names) // merged values in one order, run after run
	for _, k := range names {
		n := http.CanonicalHeaderKey(strings.ReplaceAll(k, "_", "-"))
		if n == "Content-Type" || n == "Content-Length" {
			// PHP parses the body by CONTENT_TYPE and CONTENT_LENGTH,
			// which only the real headers set: a Content_Type header is
			// not the one the body is read by, and must not make a
			// genuine delivery's Content-Type look sent twice.
			n = k
		}
		out[n] = append(out[n], h[k]...)
	}
	return out
}

// DropHeader removes every header of h that a PHP site reads as name: the
// name in any case and any spelling CGI folds to the same variable
// (Idempotency_Key is HTTP_IDEMPOTENCY_KEY too). name "" removes nothing.
func DropHeader(h http.Header, name string) {
	if name == "" {
		return
	}
	want := envName(name)
	for k := range h {
		if envName(k) == want {
			delete(h, k)
		}
	}
}

// DropClientAddrHeaders removes every header whose name CGI reads as one
// of ClientAddrHeaders.
func DropClientAddrHeaders(h http.Header) {
	for k := range h {
		if clientAddrEnv[envName(k)] {
			delete(h, k)
		}
	}
}

// ClientAddr returns the sender's address for a request that reached
// hookonce from peer remoteAddr: the peer itself, or, when the peer is a
// trusted proxy, the last address in X-Forwarded-For that is not a trusted
// proxy (else X-Real-IP). It is the address the site sees once hookonce
// passes it on, and the one source-address checks judge.
func (c *Contract) ClientAddr(remoteAddr string, h http.Header) netip.Addr {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	peer := ap.Addr().Unmap()
	if !c.trusted(peer) {
		return peer
	}
	var hops []string
	for _, v := range h.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return peer // a chain we cannot read: trust only what we saw
		}
		if a = a.Unmap(); !c.trusted(a) {
			return a
		}
	}
	if a, err := netip.ParseAddr(strings.TrimSpace(h.Get("X-Real-Ip"))); err == nil {
		return a.Unmap()
	}
	return peer
}

func (c *Contract) trusted(ip netip.Addr) bool {
	for _, p := range c.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
