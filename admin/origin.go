package admin

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/hookonce/hookonce/internal/problem"
)

// Without a token the admin listener is open to whoever reaches its
// loopback port, and a browser on the operator's machine reaches it too,
// on behalf of any page it shows. So, with no token configured:
//
//   - every request must name a loopback host (localhost, 127.0.0.0/8,
//     [::1]; any port, so that ssh -L works) or the host of
//     Options.ListenAddr: a DNS-rebinding page names its own host, and is
//     answered 421 (hostAllowed);
//   - a POST, PUT, PATCH or DELETE must not come from another origin: an
//     Origin header other than the listener's own (or "null"), or
//     Sec-Fetch-Site cross-site or same-site, is answered 403 (crossSite);
//   - a POST, PUT, PATCH or DELETE to the API (everything but the /ui
//     forms, which carry CSRF tokens) must send Content-Type:
//     application/json, which a cross-site form cannot, else 403
//     (apiWrite).
//
// With a token none of this applies: a browser cannot send the bearer
// header across sites or with a rebound name, the /ui cookie is
// SameSite=Strict, bound to the name the browser used, and its forms carry
// CSRF tokens.

// APIWriteContentType is what a POST, PUT, PATCH or DELETE to the admin API
// must send as Content-Type when no token is configured (a body is
// optional).
const APIWriteContentType = "application/json"

// guard answers a request the rules above refuse and reports whether it did.
func (h *Handler) guard(w http.ResponseWriter, r *http.Request) bool {
	if h.o.Token != "" {
		return false
	}
	if !h.hostAllowed(r.Host) {
		problem.Write(w, http.StatusMisdirectedRequest, "Misdirected request",
			"without an admin token this listener answers only requests for a loopback host (localhost, 127.0.0.0/8, [::1]) or its listen address, "+
				"not "+quoteHost(r.Host)+" (DNS rebinding); use http://127.0.0.1:PORT or configure --admin-token-file")
		return true
	}
	if safeMethod(r.Method) {
		return false
	}
	if why := crossSite(r); why != "" {
		problem.Write(w, http.StatusForbidden, "Cross-site request refused",
			"without an admin token a "+r.Method+" must come from this listener's own origin: "+why)
		return true
	}
	return false
}

// apiWrite guards the API's POSTs and DELETEs: without a token they must
// send Content-Type: application/json, which an HTML form (the one
// cross-site write a browser sends without asking) cannot.
func (h *Handler) apiWrite(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.o.Token == "" && !jsonContentType(r) {
			problem.Write(w, http.StatusForbidden, "Cross-site request refused",
				"without an admin token a "+r.Method+" to the admin API must send Content-Type: "+APIWriteContentType+
					" (a body is optional; hookonce redeliver and hookonce probe do), so that a form on another site cannot send it")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions || m == http.MethodTrace
}

func jsonContentType(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == APIWriteContentType
}

// crossSite says why r, a state-changing request, comes from another
// origin by what a browser tells: Sec-Fetch-Site and Origin (a client that
// sends neither is not a browser, or one too old for either; the content
// type rule covers it). "" means it does not.
func crossSite(r *http.Request) string {
	site := strings.ToLower(strings.TrimSpace(r.Header.Get("Sec-Fetch-Site")))
	if site == "cross-site" || site == "same-site" {
		return "the browser says Sec-Fetch-Site: " + site
	}
	origins := r.Header.Values("Origin")
	if len(origins) == 0 {
		return ""
	}
	if len(origins) > 1 {
		return "more than one Origin header"
	}
	o := strings.TrimSpace(origins[0])
	if o == "null" {
		// An opaque origin (a sandboxed frame, a file:// or data: page),
		// unless the browser vouches that the request is same-origin (a
		// page whose referrer policy is no-referrer sends Origin: null
		// on its own form POSTs).
		if site == "same-origin" {
			return ""
		}
		return "Origin: null"
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return "Origin " + quoteHost(o) + " is not this listener's (" + quoteHost(r.Host) + ")"
	}
	return ""
}

// hostAllowed reports whether host (a Host header, port optional) names
// loopback or the listen address's host. An empty Host (HTTP/1.0) names
// nothing a browser would send and is let through.
func (h *Handler) hostAllowed(host string) bool {
	if host == "" {
		return true
	}
	name := hostName(host)
	if isLoopbackName(name) {
		return true
	}
	if lh, _, err := net.SplitHostPort(h.o.ListenAddr); err == nil && lh != "" {
		return strings.EqualFold(name, strings.TrimSuffix(lh, "."))
	}
	return false
}

// hostName is host without its port and brackets, and without a trailing
// dot.
func hostName(host string) string {
	if n, _, err := net.SplitHostPort(host); err == nil {
		host = n
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(host, ".")
}

func isLoopbackName(name string) bool {
	if strings.EqualFold(name, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(name)
	return err == nil && ip.Unmap().IsLoopback()
}

// quoteHost quotes a header value for a problem detail, cut short.
func quoteHost(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return strconv.Quote(s)
}
