package contract

import (
	"bytes"
	"crypto/hmac"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Success is a sender's rule for telling an applied delivery from one the
// site failed to apply while answering a final status: a 1C-Bitrix payment
// handler answers 200 either way and puts the verdict in the body (trap 21
// in ARCHITECTURE.md). An answer that fails it is passed to the sender,
// not stored, and frees the claim, so the sender's retry runs the handler
// again.
type Success struct {
	// Statuses that count; nil means the sender's final_statuses.
	Statuses *StatusSet
	// At most one of the three below; all nil means the status decides.
	Body        *Template      // the body, whitespace trimmed, equals it
	BodyMatches *regexp.Regexp // the body matches it
	JSON        []JSONWant     // the body is JSON with these fields

	// secrets fill {secret} in Body's digests: the sender's signature
	// secrets, current first (see bindSuccessSecrets).
	secrets [][]byte
}

// JSONWant is one field an answer must hold: a gjson path and a value
// (string, number or bool as written in the config).
type JSONWant struct {
	Path  string
	Value any
}

// Succeeded reports whether the site's answer (status, body) applied the
// delivery req, and when not, why.
func (s *Sender) Succeeded(req *Request, status int, body []byte) (bool, string) {
	su := s.Success
	statuses := s.FinalStatuses
	if su != nil && su.Statuses != nil {
		statuses = *su.Statuses
	}
	if !statuses.Final(status) {
		return false, fmt.Sprintf("status %d is not a success status", status)
	}
	switch {
	case su == nil:
		return true, ""
	case su.Body != nil:
		if !su.bodyMatches(req, bytes.TrimSpace(body)) {
			return false, "the answer's body is not the success body " + su.Body.String()
		}
	case su.BodyMatches != nil:
		if !su.BodyMatches.Match(body) {
			return false, "the answer's body does not match " + strconv.Quote(su.BodyMatches.String())
		}
	case su.JSON != nil:
		if !gjson.ValidBytes(body) {
			return false, "the answer is not JSON"
		}
		for _, w := range su.JSON {
			if !jsonEquals(gjson.GetBytes(body, w.Path), w.Value) {
				return false, fmt.Sprintf("the answer's %s is not %v", w.Path, w.Value)
			}
		}
	}
	return true, ""
}

func jsonEquals(got gjson.Result, want any) bool {
	switch w := want.(type) {
	case string:
		return got.Type == gjson.String && got.Str == w
	case bool:
		return (got.Type == gjson.True && w) || (got.Type == gjson.False && !w)
	case int:
		return got.Type == gjson.Number && got.Num == float64(w)
	case float64:
		return got.Type == gjson.Number && got.Num == w
	case nil:
		return got.Type == gjson.Null
	}
	return false
}

// Template is text with {source.name} parts taken from the request:
// "OK{form.InvId}" answers Robokassa's payment InvId=42 with "OK42".
// "{{" and "}}" stand for literal braces.
//
// A success body may also hold a digest, {md5:…}, {sha1:…}, {sha256:…}
// or {sha512:…}: the text inside (literals, {source.name} parts and
// {secret}, the sender's signature secret) is hashed and written as
// lower-case hex. PayKeeper's "OK {md5:{request.id}{secret}}" is the
// shop's answer "OK " + md5(id + secret word). The secret only ever goes
// into a digest: a success body cannot hold it as text, and nothing
// hookonce writes (logs, errors, check) holds the rendered digest.
type Template struct {
	text  string
	parts []templatePart
}

type templatePart struct {
	lit    string
	src    Source // "" for a literal, the secret or a digest
	name   string
	secret bool      // {secret}: in signature messages and inside digests
	digest string    // {md5:…}: the algorithm; inner is what it hashes
	inner  *Template // the digest's text
	// Modifiers of a {source.name} part in a signature message (and
	// inside digests): {optional:form.X} signs an absent value as empty,
	// as a sender that concatenates its optional fields does;
	// {decimal2:form.X} signs the number with two decimals, as PHP's
	// number_format writes it (see phpDecimal2).
	optional bool
	decimal2 bool
}

// ParseTemplate compiles a success body template.
func ParseTemplate(text string) (*Template, error) { return parseTemplate(text, false) }

// parseTemplate compiles text; withSecret allows {secret}, which only a
// signature message may hold as text. A success body (withSecret false)
// may hold digests, and {secret} inside them.
func parseTemplate(text string, withSecret bool) (*Template, error) {
	return parseTemplateIn(text, withSecret, !withSecret)
}

// digestRef splits "{md5:" at text[i:] into the algorithm and the index
// of the digest's closing brace; ok false when text[i:] is no digest.
func digestRef(text string, i int) (alg string, end int, err error) {
	name, _, found := strings.Cut(text[i+1:], ":")
	if !found || hashAlgorithms[name] == nil {
		return "", 0, nil
	}
	depth := 0
	for j := i; j < len(text); j++ {
		switch text[j] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return name, j, nil
			}
		}
	}
	return "", 0, fmt.Errorf("{%s:…}: unclosed {", name)
}

// looksLikeDigest reports whether a reference starts "name:" with a short
// lower-case name (a digest, known or not), not "source.name".
func looksLikeDigest(ref string) bool {
	name, _, ok := strings.Cut(ref, ":")
	if !ok || name == "" || len(name) > 8 {
		return false
	}
	for _, r := range name {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

func parseTemplateIn(text string, withSecret, withDigest bool) (*Template, error) {
	t := &Template{text: text}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, templatePart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '{' && strings.HasPrefix(text[i:], "{{"), c == '}' && strings.HasPrefix(text[i:], "}}"):
			lit.WriteByte(c)
			i++
		case c == '{' && withDigest && looksLikeDigest(text[i+1:]):
			alg, end, err := digestRef(text, i)
			if err != nil {
				return nil, err
			}
			if alg == "" {
				ref, _, _ := strings.Cut(text[i+1:], "}")
				return nil, fmt.Errorf("{%s}: want a digest {md5:…}, {sha1:…}, {sha256:…} or {sha512:…}", ref)
			}
			inner, err := parseTemplateIn(text[i+len(alg)+2:end], true, false)
			if err != nil {
				return nil, fmt.Errorf("{%s:…}: %v", alg, err)
			}
			flush()
			t.parts = append(t.parts, templatePart{digest: alg, inner: inner})
			i = end
		case c == '{':
			end := strings.IndexByte(text[i:], '}')
			if end < 0 {
				return nil, errors.New("unclosed {")
			}
			ref := text[i+1 : i+end]
			flush()
			i += end
			if ref == "secret" && withSecret {
				t.parts = append(t.parts, templatePart{secret: true})
				continue
			}
			var optional, decimal2 bool
			if withSecret {
				for {
					if r, ok := strings.CutPrefix(ref, "optional:"); ok {
						ref, optional = r, true
					} else if r, ok := strings.CutPrefix(ref, "decimal2:"); ok {
						ref, decimal2 = r, true
					} else {
						break
					}
				}
			}
			src, name, ok := strings.Cut(ref, ".")
			switch Source(src) {
			case FromForm, FromQuery, FromHeader, FromBody, FromRequest:
			default:
				ok = false
			}
			if !ok || name == "" {
				want := "{form.NAME}, {query.NAME}, {request.NAME}, {header.NAME} or {body.PATH}"
				switch {
				case withSecret:
					want += ", or {secret}"
				case withDigest && ref == "secret":
					return nil, errors.New("{secret}: a success body holds the secret only inside a digest, such as {md5:{request.id}{secret}}")
				case withDigest:
					want += ", or a digest such as {md5:…}"
				}
				return nil, fmt.Errorf("{%s}: want %s", ref, want)
			}
			if Source(src) == FromHeader {
				name = http.CanonicalHeaderKey(name)
			}
			t.parts = append(t.parts, templatePart{src: Source(src), name: name, optional: optional, decimal2: decimal2})
		case c == '}':
			return nil, errors.New("unopened }: write }} for a literal brace")
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return t, nil
}

// Render fills the template from req; an absent value renders empty. A
// template that holds the secret needs RenderSecret.
func (t *Template) Render(req *Request) string { return t.RenderSecret(req, nil) }

// RenderSecret fills the template from req with secret as {secret}
// (inside its digests).
func (t *Template) RenderSecret(req *Request, secret []byte) string {
	var b strings.Builder
	t.render(&b, req, secret)
	return strings.TrimSpace(b.String())
}

func (t *Template) render(b *strings.Builder, req *Request, secret []byte) {
	for _, p := range t.parts {
		switch {
		case p.digest != "":
			var in strings.Builder
			p.inner.render(&in, req, secret)
			h := hashAlgorithms[p.digest]()
			h.Write([]byte(in.String()))
			b.WriteString(hex.EncodeToString(h.Sum(nil)))
		case p.secret:
			b.Write(secret)
		case p.src == "":
			b.WriteString(p.lit)
		default:
			v, _, _ := req.Value(p.src, p.name)
			if p.decimal2 {
				if d, ok := phpDecimal2(v); ok {
					v = d
				}
			}
			b.WriteString(v)
		}
	}
}

// phpDecimal2 writes a number as PHP's number_format((float)$v, 2) does
// with "." as the point: two decimals, rounded half away from zero, no thousands
// separator, never "-0.00". PHP rounds the value's shortest decimal
// form (so 1.005 is 1.01), and so does this. ok is false for what is no
// plain decimal number (PHP would read a prefix of it, or 0): a sender
// signs the number it sent, so such a value is no valid delivery.
func phpDecimal2(v string) (string, bool) {
	v = strings.TrimSpace(v)
	if v == "" || strings.Trim(v, "0123456789.eE+-") != "" {
		return "", false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", false
	}
	whole, frac, _ := strings.Cut(strconv.FormatFloat(math.Abs(f), 'f', -1, 64), ".")
	up := len(frac) > 2 && frac[2] >= '5'
	digits := []byte(whole + (frac + "00")[:2])
	for i := len(digits) - 1; up && i >= 0; i-- { // add one cent, carrying
		if digits[i] == '9' {
			digits[i] = '0'
			continue
		}
		digits[i]++
		up = false
	}
	if up {
		digits = append([]byte{'1'}, digits...)
	}
	out := string(digits[:len(digits)-2]) + "." + string(digits[len(digits)-2:])
	if f < 0 && strings.Trim(out, "0.") != "" {
		out = "-" + out
	}
	return out, true
}

// holdsSecret reports whether {secret} is in the template or its digests.
func (t *Template) holdsSecret() bool {
	for _, p := range t.parts {
		if p.secret || (p.inner != nil && p.inner.holdsSecret()) {
			return true
		}
	}
	return false
}

// bodyMatches compares a success body with the template, under each of
// the sender's current secrets when the template holds one.
func (su *Success) bodyMatches(req *Request, body []byte) bool {
	if !su.Body.holdsSecret() {
		return string(body) == su.Body.Render(req)
	}
	for _, key := range su.secrets {
		if hmac.Equal(body, []byte(su.Body.RenderSecret(req, key))) {
			return true
		}
	}
	return false
}

// bindSecrets gives a success body that holds {secret} the sender's
// signature secrets (a digest or hmac scheme's). The preset's Success is
// shared, so the sender gets its own copy.
func (s *Sender) bindSuccessSecrets() []Problem {
	if s.Success == nil || s.Success.Body == nil || !s.Success.Body.holdsSecret() {
		return nil
	}
	var keys [][]byte
	if v, ok := s.verifier.(*messageVerifier); ok {
		keys = v.keys
	}
	if len(keys) == 0 {
		return []Problem{{Field: "success.body", Msg: "{secret} needs the sender's signature secret: a digest or hmac signature with secret, secret_env or secret_file"}}
	}
	su := *s.Success
	su.secrets = keys
	s.Success = &su
	return nil
}

func (t *Template) String() string { return strconv.Quote(t.text) }

// successFile is a sender's success section in the config file.
//
//	success:
//	  status: 2xx                 # the statuses that count (default final_statuses)
//	  body: "OK{form.InvId}"      # and at most one of: body, body_matches, json
//	  body_matches: "^OK"
//	  json: {code: 0}
type successFile struct {
	Status      *string        `yaml:"status"`
	Body        *string        `yaml:"body"`
	BodyMatches *string        `yaml:"body_matches"`
	JSON        map[string]any `yaml:"json"`
}

func compileSuccess(sf *successFile) (*Success, []Problem) {
	var probs []Problem
	bad := func(field, format string, args ...any) {
		probs = append(probs, Problem{Field: "success." + field, Msg: fmt.Sprintf(format, args...)})
	}
	su := &Success{}
	if sf.Status != nil {
		set, err := ParseStatusSet(*sf.Status)
		if err != nil {
			bad("status", "%v", err)
		}
		su.Statuses = &set
	}
	n := 0
	if sf.Body != nil {
		n++
		t, err := ParseTemplate(*sf.Body)
		if err != nil {
			bad("body", "%v", err)
		}
		su.Body = t
	}
	if sf.BodyMatches != nil {
		n++
		re, err := regexp.Compile(*sf.BodyMatches)
		if err != nil {
			bad("body_matches", "%v", err)
		}
		su.BodyMatches = re
	}
	if sf.JSON != nil {
		n++
		if len(sf.JSON) == 0 {
			bad("json", "name at least one field")
		}
		keys := make([]string, 0, len(sf.JSON))
		for k := range sf.JSON {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch v := sf.JSON[k].(type) {
			case string, bool, int, float64, nil:
				su.JSON = append(su.JSON, JSONWant{Path: k, Value: v})
			default:
				bad("json."+k, "want a string, number, boolean or null")
			}
		}
	}
	if n > 1 {
		bad("body", "set at most one of body, body_matches and json")
	}
	return su, probs
}
