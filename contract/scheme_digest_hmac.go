package contract

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"sort"
	"strings"
	"time"
)

// Schemes digest and hmac (one messageVerifier: the secret in the
// message, or the HMAC's key) hash a message built from the delivery as
// the site reads it: Robokassa's MD5 of "OutSum:InvId:Password2:Shp_…",
// T-Bank's SHA-256 of its sorted root values with the password among them,
// the RBS gateways' HMAC of "name;value;" pairs, CloudPayments' HMAC of
// the raw body. One message builder serves all of them, so each sender is
// configuration, not code.

// hashAlgorithms by their config name. MD5 and SHA-1 are here because
// senders still sign with them (Robokassa defaults to MD5), not because
// they are recommended.
var hashAlgorithms = map[string]func() hash.Hash{
	"md5": md5.New, "sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New,
}

// Signature encodings of the generic schemes.
const (
	encHex      = "hex"       // either case (the sender's case may vary)
	encHexLower = "hex-lower" // lower case only
	encHexUpper = "hex-upper" // upper case only
	encBase64   = "base64"    // standard, padded
)

// messageVerifier checks a digest or an HMAC of a built message.
type messageVerifier struct {
	keyed    bool // hmac: the secret is the key; digest: it is in the message
	newHash  func() hash.Hash
	size     int
	msg      *messageSpec
	from     []KeyPart
	encoding string
	keys     [][]byte // current first, previous second
}

func (v *messageVerifier) Verify(req *Request, _ time.Time) error {
	raw, where, err := readSignature(req, v.from)
	if err != nil {
		return err
	}
	sig, err := v.decode(raw, where)
	if err != nil {
		return err
	}
	if v.keyed {
		msg, err := v.msg.build(req, nil)
		if err != nil {
			return err
		}
		found := false
		for _, key := range v.keys { // every secret tried: the time tells none
			m := hmac.New(v.newHash, key)
			m.Write(msg)
			found = hmac.Equal(m.Sum(nil), sig) || found
		}
		if found {
			return nil
		}
		return sigErr(ReasonMismatch)
	}
	found := false
	for _, key := range v.keys {
		msg, err := v.msg.build(req, key)
		if err != nil {
			return err
		}
		h := v.newHash()
		h.Write(msg)
		found = hmac.Equal(h.Sum(nil), sig) || found
	}
	if found {
		return nil
	}
	return sigErr(ReasonMismatch)
}

// decode turns the sender's text into the digest's bytes, checking its
// length and form first, so a malformed value is named as such.
func (v *messageVerifier) decode(raw string, where KeyPart) ([]byte, error) {
	if v.encoding == encBase64 {
		if len(raw) != base64.StdEncoding.EncodedLen(v.size) {
			return nil, sigErr("malformed %s: want base64 of %d bytes", describe(where), v.size)
		}
		b, err := base64.StdEncoding.Strict().DecodeString(raw)
		if err != nil || len(b) != v.size {
			return nil, sigErr("malformed %s: want base64 of %d bytes", describe(where), v.size)
		}
		return b, nil
	}
	if len(raw) != 2*v.size {
		return nil, sigErr("malformed %s: want %d hex digits", describe(where), 2*v.size)
	}
	switch {
	case v.encoding == encHexLower && strings.ContainsAny(raw, "ABCDEF"):
		return nil, sigErr("malformed %s: want lower-case hex", describe(where))
	case v.encoding == encHexUpper && strings.ContainsAny(raw, "abcdef"):
		return nil, sigErr("malformed %s: want upper-case hex", describe(where))
	}
	b, err := hex.DecodeString(raw)
	if err != nil {
		return nil, sigErr("malformed %s: want %d hex digits", describe(where), 2*v.size)
	}
	return b, nil
}

// messageSpec is what a digest or hmac scheme hashes: the parts, then the
// fields, joined; or the raw body.
type messageSpec struct {
	body   bool
	parts  []*Template
	fields *fieldsSpec
	join   string
}

// build renders the message for one secret (nil for an HMAC, whose message
// holds none). Its errors are SignatureErrors that name the missing value.
func (m *messageSpec) build(req *Request, secret []byte) ([]byte, error) {
	if m.body {
		return req.Body, nil
	}
	var b bytes.Buffer
	n := 0
	next := func() {
		if n > 0 {
			b.WriteString(m.join)
		}
		n++
	}
	for _, p := range m.parts {
		next()
		if err := renderExact(&b, p, req, secret); err != nil {
			return nil, err
		}
	}
	if m.fields != nil {
		entries, err := m.fields.entries(req, secret)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			next()
			b.WriteString(e)
		}
	}
	return b.Bytes(), nil
}

// renderExact writes a message part as the sender signed it: values as
// they are (no trimming), and an absent value refused rather than read as
// empty, so the 401 says what is missing.
func renderExact(b *bytes.Buffer, t *Template, req *Request, secret []byte) error {
	for _, p := range t.parts {
		switch {
		case p.secret:
			b.Write(secret)
		case p.src == "":
			b.WriteString(p.lit)
		default:
			ref := KeyPart{Source: p.src, Name: p.name}
			v, ok, err := req.Value(p.src, p.name)
			if err != nil {
				return sigErr("malformed %s: %v", describe(ref), err)
			}
			if !ok && p.optional {
				continue
			}
			if !ok {
				return sigErr("no %s", describe(ref))
			}
			if p.decimal2 {
				d, ok := phpDecimal2(v)
				if !ok {
					return sigErr("malformed %s: not a number", describe(ref))
				}
				v = d
			}
			b.WriteString(v)
		}
	}
	return nil
}

// fieldsSpec signs every field of a source that passes its filter,
// sorted by name in byte order (PHP's ksort, Java's TreeMap).
type fieldsSpec struct {
	source     Source
	prefix     string
	foldPrefix bool
	exclude    map[string]bool
	add        map[string]*Template
	format     []formatPiece
}

func (f *fieldsSpec) included(name string) bool {
	if f.exclude[name] {
		return false
	}
	if f.prefix == "" {
		return true
	}
	if len(name) < len(f.prefix) {
		return false
	}
	if f.foldPrefix {
		return strings.EqualFold(name[:len(f.prefix)], f.prefix)
	}
	return strings.HasPrefix(name, f.prefix)
}

func (f *fieldsSpec) entries(req *Request, secret []byte) ([]string, error) {
	all, err := req.Fields(f.source)
	if err != nil {
		return nil, sigErr("cannot read the %s fields: %v", f.source, err)
	}
	chosen := map[string]string{}
	for k, v := range all {
		if f.included(k) {
			chosen[k] = v
		}
	}
	// Added fields (T-Bank's Password) replace a sent field of that name,
	// as the sender's own code does.
	for k, t := range f.add {
		var b bytes.Buffer
		if err := renderExact(&b, t, req, secret); err != nil {
			return nil, err
		}
		chosen[k] = b.String()
	}
	names := sortedKeys(chosen)
	out := make([]string, len(names))
	for i, k := range names {
		out[i] = renderPair(f.format, k, chosen[k])
	}
	return out, nil
}

// formatPiece is one piece of a field format such as "{k}={v}".
type formatPiece struct {
	lit string
	ref byte // 'k', 'v', or 0 for a literal
}

func parseFormat(s string) ([]formatPiece, error) {
	var out []formatPiece
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			out = append(out, formatPiece{lit: lit.String()})
			lit.Reset()
		}
	}
	hasV := false
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "{{"), strings.HasPrefix(s[i:], "}}"):
			lit.WriteByte(s[i])
			i++
		case strings.HasPrefix(s[i:], "{k}"), strings.HasPrefix(s[i:], "{v}"):
			flush()
			out = append(out, formatPiece{ref: s[i+1]})
			hasV = hasV || s[i+1] == 'v'
			i += 2
		case s[i] == '{' || s[i] == '}':
			return nil, errors.New("want {k} for the name, {v} for the value, {{ and }} for braces")
		default:
			lit.WriteByte(s[i])
		}
	}
	flush()
	if !hasV {
		return nil, errors.New("must hold {v}, or the values would not be signed")
	}
	return out, nil
}

func renderPair(format []formatPiece, k, v string) string {
	var b strings.Builder
	for _, p := range format {
		switch p.ref {
		case 'k':
			b.WriteString(k)
		case 'v':
			b.WriteString(v)
		default:
			b.WriteString(p.lit)
		}
	}
	return b.String()
}

// buildMessageScheme compiles scheme digest or hmac.
func buildMessageScheme(c *sigCompiler) Verifier {
	v := &messageVerifier{keyed: c.cfg.Scheme == SchemeHMAC, keys: c.keys, encoding: encHex}
	alg := c.cfg.Algorithm
	if alg == "" {
		alg = "sha256"
	}
	if h, ok := hashAlgorithms[alg]; ok {
		v.newHash, v.size = h, h().Size()
	} else {
		c.bad("algorithm", "%q: want one of %s", alg, strings.Join(sortedKeys(hashAlgorithms), ", "))
	}
	switch c.cfg.Encoding {
	case "":
	case encHex, encHexLower, encHexUpper, encBase64:
		v.encoding = c.cfg.Encoding
	default:
		c.bad("encoding", "%q: want hex, hex-lower, hex-upper or base64", c.cfg.Encoding)
	}
	v.from = c.compileFrom()
	v.msg = c.compileMessage()
	if v.msg == nil {
		return v
	}
	switch holds := v.msg.holdsSecret(); {
	case v.keyed && holds:
		c.bad("message", "{secret} is the HMAC key for scheme hmac; it does not go in the message")
	case !v.keyed && !holds:
		c.bad("message", "a digest must hold {secret} (in parts or fields.add), or anyone could compute it; to sign the raw body use scheme hmac")
	}
	if f := v.msg.fields; f != nil {
		for _, ref := range v.from {
			if f.signs(ref) {
				c.bad("message.fields.exclude", "the signature's own %s would be among the signed fields: exclude it", describe(ref))
			}
		}
	}
	return v
}

func (m *messageSpec) holdsSecret() bool {
	has := func(t *Template) bool {
		for _, p := range t.parts {
			if p.secret {
				return true
			}
		}
		return false
	}
	for _, t := range m.parts {
		if has(t) {
			return true
		}
	}
	if m.fields != nil {
		for _, t := range m.fields.add {
			if has(t) {
				return true
			}
		}
	}
	return false
}

// signs reports whether a value at ref would be one of the signed fields.
func (f *fieldsSpec) signs(ref KeyPart) bool {
	overlap := map[Source][]Source{
		FromForm:    {FromForm, FromRequest},
		FromQuery:   {FromQuery, FromRequest},
		FromRequest: {FromForm, FromQuery, FromRequest},
		FromBody:    {FromBody},
	}
	for _, s := range overlap[f.source] {
		if s == ref.Source {
			return f.included(ref.Name) && f.add[ref.Name] == nil
		}
	}
	return false
}

// compileMessage reads the message section; nil when it is unusable.
func (c *sigCompiler) compileMessage() *messageSpec {
	mc := c.cfg.Message
	if mc == nil {
		c.bad("message", "required for scheme %s: parts, fields or body", c.cfg.Scheme)
		return nil
	}
	m := &messageSpec{body: mc.Body, join: mc.Join}
	ok := true
	switch {
	case mc.Body && (mc.Parts != nil || mc.Fields != nil || mc.Join != ""):
		c.bad("message.body", "the raw body is the whole message: drop parts, fields and join")
		ok = false
	case !mc.Body && len(mc.Parts) == 0 && mc.Fields == nil:
		c.bad("message", "set parts, fields or body")
		ok = false
	}
	for i, text := range mc.Parts {
		t, err := parseTemplate(text, true)
		if err != nil {
			c.bad(fmt.Sprintf("message.parts[%d]", i), "%v", err)
			ok = false
			continue
		}
		m.parts = append(m.parts, t)
	}
	if mc.Fields != nil {
		m.fields = c.compileFields(mc.Fields)
		ok = ok && m.fields != nil
	}
	if !ok {
		return nil
	}
	return m
}

func (c *sigCompiler) compileFields(fc *FieldsConfig) *fieldsSpec {
	f := &fieldsSpec{prefix: fc.IncludePrefix, foldPrefix: fc.IgnorePrefixCase,
		exclude: map[string]bool{}, add: map[string]*Template{}}
	ok := true
	switch src := Source(fc.Source); src {
	case FromForm, FromQuery, FromRequest, FromBody:
		f.source = src
	case "":
		c.bad("message.fields.source", "required: form, query, request or body")
		ok = false
	default:
		c.bad("message.fields.source", "%q: want form, query, request or body", fc.Source)
		ok = false
	}
	if fc.IgnorePrefixCase && fc.IncludePrefix == "" {
		c.bad("message.fields.ignore_prefix_case", "only applies with include_prefix")
		ok = false
	}
	for _, name := range fc.Exclude {
		f.exclude[name] = true
	}
	names := make([]string, 0, len(fc.Add))
	for name := range fc.Add {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t, err := parseTemplate(fc.Add[name], true)
		if name == "" || err != nil {
			if err == nil {
				err = errors.New("a field needs a name")
			}
			c.bad("message.fields.add."+name, "%v", err)
			ok = false
			continue
		}
		f.add[name] = t
	}
	format := fc.Format
	if format == "" {
		format = "{k}={v}"
	}
	pieces, err := parseFormat(format)
	if err != nil {
		c.bad("message.fields.format", "%q: %v", format, err)
		ok = false
	}
	f.format = pieces
	if !ok {
		return nil
	}
	return f
}

var _ Verifier = (*messageVerifier)(nil)
