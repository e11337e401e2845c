package proxy

import (
	"net/http"
	"net/textproto"
	"strings"

	"github.com/hookonce/hookonce/contract"
)

// dropHeader is contract.DropHeader without its allocations: it removes
// every header of h that a PHP site reads as name (CGI's variable: upper
// case, "-" as "_"). contract builds each name's variable as a new string,
// two allocations a header on every forward; an ASCII name (every name
// net/http's server accepts) is compared here byte by byte, any other the
// way contract does. TestHeaderNamesAsContractReadsThem holds the two
// equal.
func dropHeader(h http.Header, name string) {
	if name == "" {
		return
	}
	for k := range h {
		if sameCGIName(k, name) {
			delete(h, k)
		}
	}
}

// dropClientAddrHeaders is contract.DropClientAddrHeaders without its
// allocations (see dropHeader): it removes every header whose name CGI
// reads as one of contract.ClientAddrHeaders.
func dropClientAddrHeaders(h http.Header) {
	var buf [64]byte
	for k := range h {
		if v, ok := cgiName(buf[:0], k); ok {
			if clientAddrVars[string(v)] {
				delete(h, k)
			}
		} else if clientAddrVars[cgiVar(k)] {
			delete(h, k)
		}
	}
}

// clientAddrVars are the CGI variables of contract.ClientAddrHeaders.
var clientAddrVars = func() map[string]bool {
	m := make(map[string]bool, len(contract.ClientAddrHeaders))
	for _, h := range contract.ClientAddrHeaders {
		m[cgiVar(h)] = true
	}
	return m
}()

// cgiVar is header name h as CGI and PHP's $_SERVER spell it, without the
// HTTP_ prefix: contract's rule, for any name.
func cgiVar(h string) string {
	return strings.ToUpper(strings.ReplaceAll(h, "-", "_"))
}

// cgiName appends cgiVar(h) to dst for an ASCII name h that fits dst's
// capacity; ok false: another name, for cgiVar itself (strings.ToUpper
// maps some non-ASCII letters to ASCII ones).
func cgiName(dst []byte, h string) (v []byte, ok bool) {
	if len(h) > cap(dst) {
		return nil, false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c >= 0x80 {
			return nil, false
		}
		dst = append(dst, cgiByte(c))
	}
	return dst, true
}

// sameCGIName reports whether cgiVar(a) == cgiVar(b).
func sameCGIName(a, b string) bool {
	if len(a) == len(b) {
		for i := 0; i < len(a); i++ {
			x, y := a[i], b[i]
			if x >= 0x80 || y >= 0x80 {
				return cgiVar(a) == cgiVar(b)
			}
			if cgiByte(x) != cgiByte(y) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(a); i++ {
		if a[i] >= 0x80 {
			return cgiVar(a) == cgiVar(b)
		}
	}
	for i := 0; i < len(b); i++ {
		if b[i] >= 0x80 {
			return cgiVar(a) == cgiVar(b)
		}
	}
	return false // ASCII names keep their length
}

// cgiByte is an ASCII byte of a header name as CGI spells it.
func cgiByte(c byte) byte {
	switch {
	case 'a' <= c && c <= 'z':
		return c - ('a' - 'A')
	case c == '-':
		return '_'
	}
	return c
}

// stripHopByHop is contract.StripHopByHop, deleting its fixed names
// directly: Header.Del canonicalizes its argument on every call (some 380
// instructions a name, 9 names twice a forward), and these are canonical
// already. TestHeaderNamesAsContractReadsThem holds the two equal.
func stripHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopByHop {
		delete(h, k)
	}
}

// hopByHop are the headers every proxy hop removes (RFC 9110 7.6.1),
// besides those Connection names: contract's list.
var hopByHop = [...]string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}
