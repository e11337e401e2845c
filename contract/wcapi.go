package contract

import (
	"errors"
	"strings"
)

// WooCommerce runs a gateway's callback handler (the action
// woocommerce_api_<name>) from WC_API::handle_api_requests, hooked on
// WordPress's parse_request: on every URL WordPress's index.php serves,
// not only "/". Its name comes from, in this order:
//
//  1. $_GET['wc-api'] when it is not empty(): sanitize_key() of it,
//     which lowercases and drops every byte but a-z, 0-9, "_" and "-"
//     (so "robokassa_result%21", "%20" or "%0a" after it name the same
//     handler); an array gives "" (no handler);
//  2. else WordPress's query var wc-api (WP::parse_request: $_POST's
//     before $_GET's, a request whose $_GET and $_POST values differ is
//     refused by WordPress, then the rewrite endpoint /…/wc-api/<name>,
//     added for every permalink with EP_ALL), lowercased after wc_clean
//     (sanitize_text_field: tags, whitespace and %XX octets removed).
//
// wcAPI reads the name the same way. Where WooCommerce's cleaning of a
// POST value or a path is not modelled (anything but a-z, A-Z, 0-9, "_"
// and "-"), the value is unreadable, never "no handler".
func (q *Request) wcAPI() (string, bool, error) {
	const name = "wc-api"
	get := q.queryVars()
	if get.IsArray(name) {
		return "", false, nil // sanitize_key of an array is "": no handler
	}
	if v, ok := get.Lookup(name); ok && !phpEmpty(v) {
		k := sanitizeKey(v)
		return k, !phpEmpty(k), nil
	} else if ok {
		// Present but empty(): WordPress's own query var decides, and a
		// POST value that differs from it is refused by WordPress
		// ("A variable mismatch has been detected"); an equal one is
		// empty too.
		return "", false, nil
	}
	if f, err := q.Form(); err == nil {
		if f.IsArray(name) {
			return "", false, errors.New("wc-api sent in the form as an array")
		}
		if v, ok := f.Lookup(name); ok {
			return cleanWCAPI(v)
		}
	}
	// The rewrite endpoint: the first "wc-api" segment of the path the
	// site runs, the rest is the value.
	p := q.Path
	for {
		i := strings.Index(p, "/"+name)
		if i < 0 {
			return "", false, nil
		}
		rest := p[i+1+len(name):]
		if rest == "" {
			return "", false, nil
		}
		if rest[0] == '/' {
			return cleanWCAPI(strings.Trim(rest, "/"))
		}
		p = rest
	}
}

// cleanWCAPI is a wc-api value from the form or the path, as
// strtolower(wc_clean()) makes it: only values WooCommerce keeps as they
// are (letters, digits, "_", "-") are read; any other byte is unreadable.
func cleanWCAPI(v string) (string, bool, error) {
	if phpEmpty(v) {
		return "", false, nil
	}
	if sanitizeKey(v) != strings.ToLower(v) {
		return "", false, errors.New("wc-api in the form or the path holds characters WooCommerce's cleaning is not modelled for")
	}
	return strings.ToLower(v), true, nil
}

// sanitizeKey is WordPress's sanitize_key: ASCII lowercase, then every
// byte but a-z, 0-9, "_" and "-" removed.
func sanitizeKey(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// phpEmpty is PHP's empty() of a string: "" and "0".
func phpEmpty(v string) bool { return v == "" || v == "0" }
