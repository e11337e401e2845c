package oneshot

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"strings"
)

// writeRequest writes req to bw as Request.Write does, for the shape of a
// webhook forward: a method, an ASCII host, a request target without
// control bytes, a User-Agent given in the header, a body of known length
// (a reader with Len, as a body read whole is), and header names and
// values Request.Write would send as they are. It then closes the body.
// handled is false, with nothing written, for any other request: the
// caller writes it with Request.Write. TestWriteRequestAsRequestWrite
// holds the bytes equal.
//
// Request.Write formats with fmt, sorts the header through a pool,
// passes every value through a strings.Replacer and validates as it
// goes: on a forward that is about a tenth of hookonce's own instructions
// outside the store.
func writeRequest(bw *bufio.Writer, req *http.Request) (handled bool, err error) {
	if req.Method == "" || req.Method == "CONNECT" || req.URL == nil || req.ContentLength <= 0 ||
		req.Body == nil || req.TransferEncoding != nil || httptrace.ContextClientTrace(req.Context()) != nil {
		return false, nil
	}
	sized, ok := req.Body.(interface{ Len() int })
	if !ok || int64(sized.Len()) != req.ContentLength {
		return false, nil
	}
	wt, ok := req.Body.(io.WriterTo)
	if !ok {
		return false, nil
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !plainHost(host) {
		return false, nil
	}
	target := req.URL.RequestURI()
	for i := 0; i < len(target); i++ {
		if c := target[i]; c < ' ' || c == 0x7f {
			return false, nil
		}
	}
	h := req.Header
	ua, ok := h["User-Agent"]
	if !ok {
		return false, nil // Request.Write sends Go's own
	}
	agent := ""
	if len(ua) > 0 {
		agent = ua[0]
	}
	if !plainValue(agent) {
		return false, nil
	}
	if _, ok := h["Connection"]; ok {
		return false, nil // Request.Write reads it for "close"
	}
	var buf [48]string
	keys := buf[:0]
	for k, vs := range h {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		}
		if len(keys) == cap(keys) || !token(k) {
			return false, nil
		}
		for _, v := range vs {
			if !plainValue(v) {
				return false, nil
			}
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)

	bw.WriteString(req.Method)
	bw.WriteByte(' ')
	bw.WriteString(target)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	if agent != "" {
		bw.WriteString("User-Agent: ")
		bw.WriteString(agent)
		bw.WriteString("\r\n")
	}
	if req.Close {
		bw.WriteString("Connection: close\r\n")
	}
	bw.WriteString("Content-Length: ")
	bw.Write(strconv.AppendInt(bw.AvailableBuffer(), req.ContentLength, 10))
	bw.WriteString("\r\n")
	for _, k := range keys {
		for _, v := range h[k] {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	if _, err := bw.WriteString("\r\n"); err != nil {
		req.Body.Close()
		return true, err
	}
	_, err = wt.WriteTo(bw)
	if cerr := req.Body.Close(); err == nil {
		err = cerr
	}
	return true, err
}

// plainHost reports whether Request.Write sends host as it is: ASCII
// letters, digits and the punctuation of names, IPv4 and IPv6 literals
// and ports; anything else (a zone, an IDN, a byte it would refuse) is
// left to Request.Write.
func plainHost(host string) bool {
	if host == "" {
		return false
	}
	for i := 0; i < len(host); i++ {
		if !hostBytes[host[i]] {
			return false
		}
	}
	return true
}

// plainValue reports whether Request.Write sends header value v as it is:
// no CR or LF (it turns them into spaces) and no space or tab at either
// end (it trims them).
func plainValue(v string) bool {
	if v == "" {
		return true
	}
	if isSpace(v[0]) || isSpace(v[len(v)-1]) {
		return false
	}
	return strings.IndexByte(v, '\r') < 0 && strings.IndexByte(v, '\n') < 0
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// token reports whether k is a valid header field name (RFC 9110 token):
// Request.Write drops a header whose name is not.
func token(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !tokenBytes[k[i]] {
			return false
		}
	}
	return true
}

// hostBytes and tokenBytes are the bytes plainHost and token take.
var hostBytes, tokenBytes = byteSet("-.:[]_"), byteSet("!#$%&'*+-.^_`|~")

// byteSet is ASCII letters and digits and the bytes of extra.
func byteSet(extra string) (set [256]bool) {
	for c := range 256 {
		set[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(extra, byte(c)) >= 0
	}
	return set
}
