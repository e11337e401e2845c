package dedupe

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// redacted replaces a password in RedactDSN's output.
const redacted = "xxxxx"

// RedactDSN returns a store DSN fit for a message or a log line: every
// password in it is replaced by "xxxxx". It is the one place that knows
// where a password can sit in a DSN:
//
//   - the password of a URL's userinfo: postgres://user:pw@host/db,
//     redis://:pw@host, redis://user:pw@host, rediss+sentinel://:pw@host;
//   - the value of a parameter whose name holds "pass", "pwd", "secret",
//     "token" or "credential", in a URL's query (?password=,
//     &sslpassword=, &sentinel_password=) or in a keyword/value DSN
//     (host=h password=secret, password='a b', Password=pw;…).
//
// Where the text is ambiguous (an '@' or a '&' inside a password) it hides
// more than the password rather than less. Everything else stays, so a
// message still says which store it is about.
func RedactDSN(dsn string) string {
	if strings.HasPrefix(dsn, "sqlite:") {
		return dsn // a file name, which holds no password (and may hold an '@')
	}
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok && urlScheme.MatchString(scheme) {
		rest = redactUserinfo(rest)
		if base, query, ok := strings.Cut(rest, "?"); ok {
			rest = base + "?" + redactQuery(query)
		}
		return scheme + "://" + rest
	}
	// Not a URL: keyword/value pairs, or something unknown that may still
	// carry a user:password@host.
	return redactKeywords(redactUserinfo(dsn))
}

// redactUserinfo masks the password of user:password@rest. The userinfo
// ends at the last '@', so a password with an '@', a '/' or a '?' in it is
// still inside it.
func redactUserinfo(s string) string {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return s
	}
	user, _, hasPassword := strings.Cut(s[:at], ":")
	if !hasPassword {
		return s
	}
	return user + ":" + redacted + s[at:]
}

var (
	urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)
	secretKey = regexp.MustCompile(`(?i)pass|pwd|secret|token|credential`)
	// nextParam is where the parameter after a secret value starts; a '&'
	// not followed by a name and '=' is taken to be part of the secret.
	nextParam = regexp.MustCompile(`&[A-Za-z_][A-Za-z0-9_.%-]*=`)
)

func isSecret(key string) bool {
	if k, err := url.QueryUnescape(key); err == nil {
		key = k
	}
	return secretKey.MatchString(key)
}

// redactQuery masks the values of secret parameters in a URL query.
func redactQuery(q string) string {
	var b strings.Builder
	for {
		param, rest, more := strings.Cut(q, "&")
		key, _, hasValue := strings.Cut(param, "=")
		if hasValue && isSecret(key) {
			b.WriteString(key + "=" + redacted)
			// The secret runs to the next parameter: it may hold a '&'.
			value := q[len(key)+1:]
			next := nextParam.FindStringIndex(value)
			if next == nil {
				return b.String()
			}
			b.WriteByte('&')
			q = value[next[0]+1:]
			continue
		}
		b.WriteString(param)
		if !more {
			return b.String()
		}
		b.WriteByte('&')
		q = rest
	}
}

// redactKeywords masks the values of secret keys in a keyword/value DSN
// (libpq's key = value, values optionally in single quotes with backslash
// escapes; ';' also separates pairs, as in ADO-style strings).
func redactKeywords(s string) string {
	var b strings.Builder
	i := 0
	for i < len(s) {
		// Separators pass through.
		if c := s[i]; c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ';' {
			b.WriteByte(c)
			i++
			continue
		}
		// A key runs to '=' or a separator.
		j := i
		for j < len(s) && !strings.ContainsRune("= \t\n\r;", rune(s[j])) {
			j++
		}
		key := s[i:j]
		k := j
		for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
			k++
		}
		if k >= len(s) || s[k] != '=' {
			b.WriteString(key) // a word without a value
			i = j
			continue
		}
		k++
		for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
			k++
		}
		end := valueEnd(s, k, isSecret(key))
		if isSecret(key) {
			b.WriteString(key + "=" + redacted)
		} else {
			b.WriteString(s[i:end])
		}
		i = end
	}
	return b.String()
}

// valueEnd finds the end of the value that starts at s[i]: a quoted value
// ends after its closing quote (or, unterminated, at the end); a bare one
// at whitespace, or for a value that is not secret also at ';'.
func valueEnd(s string, i int, secret bool) int {
	if i < len(s) && (s[i] == '\'' || s[i] == '"') {
		q := s[i]
		for j := i + 1; j < len(s); j++ {
			switch s[j] {
			case '\\':
				j++
			case q:
				return j + 1
			}
		}
		return len(s)
	}
	stop := " \t\n\r"
	if !secret {
		stop += ";"
	}
	for j := i; j < len(s); j++ {
		if strings.IndexByte(stop, s[j]) >= 0 {
			return j
		}
	}
	return len(s)
}

// RedactHeaders returns a copy of h fit to show an operator: the value of
// every header that may carry a credential or a signature is replaced by
// "xxxxx" — Authorization, Proxy-Authorization, Cookie, Set-Cookie, and
// any name holding "pass", "pwd", "secret", "token", "credential" (as a
// DSN's parameters), "auth", "sign", "hmac", "hash", "key" or "digest"
// (X-Signature, Stripe-Signature, X-Hub-Signature-256,
// X-Shopify-Hmac-Sha256, Content-Digest, X-Api-Key, …). Stores keep the
// headers whole (the site may check them itself when a kept request is
// delivered again); only what is shown is redacted.
func RedactHeaders(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, len(h))
	for name, vals := range h {
		if secretHeader.MatchString(name) || isSecret(name) {
			red := make([]string, len(vals))
			for i := range red {
				red[i] = redacted
			}
			out[name] = red
			continue
		}
		out[name] = append([]string(nil), vals...)
	}
	return out
}

var secretHeader = regexp.MustCompile(`(?i)auth|cookie|sign|hmac|hash|key|digest`)
