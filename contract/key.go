package contract

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrMissingKey is wrapped by Key when a part of the event id is absent.
var ErrMissingKey = errors.New("event id missing")

// KeyPart is one part of a sender's event id.
type KeyPart struct {
	Source Source
	Name   string // header name, JSON path, query or form field
	// Fallback are tried in order when Name is absent or empty (a
	// preset's second header, a refund's other ids).
	Fallback []string
	// Labelled prefixes the value with the name it was read from
	// ("refundedAmount=500"), so values from different fields of one
	// part never make one key.
	Labelled bool
	// When makes the part conditional: it is read only when every
	// condition holds, and is empty otherwise. Optional makes an absent
	// or empty value an empty part instead of a missing key. Presets use
	// both for what only some notifications carry (a refund's amount, a
	// receipt's number), so the notifications that lack it keep the key
	// they had: empty conditional or optional parts at the end are
	// dropped (see Key).
	When     []Condition
	Optional bool
}

func (k KeyPart) String() string {
	s := string(k.Source) + " " + k.Name
	for _, f := range k.Fallback {
		s += " (or " + f + ")"
	}
	if k.Optional {
		s += " if present"
	}
	for i, c := range k.When {
		if i == 0 {
			s += " when "
		} else {
			s += " and "
		}
		s += c.String()
	}
	return s
}

// omissible reports whether the part may come out empty.
func (k KeyPart) omissible() bool { return k.Optional || len(k.When) > 0 }

func compileKeyPart(kf keyPartFile) (KeyPart, error) {
	var parts []KeyPart
	if kf.Header != "" {
		parts = append(parts, KeyPart{Source: FromHeader, Name: http.CanonicalHeaderKey(kf.Header)})
	}
	if kf.Body != "" {
		parts = append(parts, KeyPart{Source: FromBody, Name: kf.Body})
	}
	if kf.Query != "" {
		parts = append(parts, KeyPart{Source: FromQuery, Name: kf.Query})
	}
	if kf.Form != "" {
		parts = append(parts, KeyPart{Source: FromForm, Name: kf.Form})
	}
	if kf.Request != "" {
		parts = append(parts, KeyPart{Source: FromRequest, Name: kf.Request})
	}
	if len(parts) != 1 {
		return KeyPart{}, errors.New("set exactly one of header, body, query, form or request")
	}
	return parts[0], nil
}

// ErrBadKey is wrapped by Key when a part of the event id holds what no
// event id should: control characters, NUL, invalid UTF-8.
var ErrBadKey = errors.New("event id invalid")

// unreadablePart wraps why a part that may be present could not be read
// (a header sent twice, a body that is not JSON, an ambiguous request:
// name): the error reads as its cause.
type unreadablePart struct{ err error }

func (u unreadablePart) Error() string { return u.err.Error() }
func (u unreadablePart) Unwrap() error { return u.err }

// KeyUnreadable reports whether err, from Key or ObjectKey, says a part
// was there but could not be read as the site reads it (a header sent
// twice, an ambiguous request: name, a value that is an object), or holds
// what no key should (ErrBadKey), rather than that it was absent. A body
// that is not JSON (or not a form) at all holds no such part: absent.
func KeyUnreadable(err error) bool {
	var u unreadablePart
	if errors.Is(err, errNotJSON) || errors.Is(err, errNotForm) {
		return false
	}
	return errors.As(err, &u) || errors.Is(err, ErrBadKey)
}

// maxKeyPart bounds one part of an event id.
const maxKeyPart = 512

// Key extracts the event id from a delivery, reading each part as the site
// reads it (see Request). A single part is the key as it is; several parts
// are each escaped ("\\" and "\:") and joined with ":", so no two
// different lists of parts make one key (trap 22 in ARCHITECTURE.md). An
// absent part gives an error wrapping ErrMissingKey, an unusable one
// ErrBadKey; neither quotes the body.
//
// A conditional or optional part that comes out empty is an empty part;
// such parts at the end are dropped, so "pay:CONFIRMED" stays the key of a
// notification that carries no refund amount. Dropping only trailing
// empty parts of a fixed list keeps the join one-to-one: a key still
// splits back (on unescaped ":") into exactly one list of parts.
func (s *Sender) Key(req *Request) (string, error) { return joinKey(s.Keys, req) }

// joinKey reads parts and joins them, each escaped, with ":".
func joinKey(parts []KeyPart, req *Request) (string, error) {
	if len(parts) == 0 { // a preset that names no event id (woocommerce)
		return "", fmt.Errorf("%w: the sender names no event id", ErrMissingKey)
	}
	if len(parts) == 1 && !parts[0].omissible() {
		return parts[0].extract(req)
	}
	vals := make([]string, 0, len(parts))
	for _, k := range parts {
		v, err := k.extract(req)
		if err != nil {
			return "", err
		}
		vals = append(vals, v)
	}
	for len(vals) > 1 && vals[len(vals)-1] == "" && parts[len(vals)-1].omissible() {
		vals = vals[:len(vals)-1]
	}
	if len(vals) > 1 && vals[0] == "" && parts[0].omissible() && leadingOnly(parts) {
		// A leading optional part that is absent (GitHub's hook id on a
		// hand-made delivery) is dropped too, so the key is what it was
		// before the part was added. One-to-one because every other part
		// is required: the count of separators tells whether it is there.
		// (The rest is escaped as ever: for a GUID that is the GUID.)
		vals, parts = vals[1:], parts[1:]
	}
	if len(vals) == 1 && vals[0] == "" {
		return "", fmt.Errorf("%w: %s absent or empty", ErrMissingKey, parts[0])
	}
	var b strings.Builder
	for i, v := range vals {
		if i > 0 {
			b.WriteByte(':')
		}
		for j := 0; j < len(v); j++ {
			if v[j] == '\\' || v[j] == ':' {
				b.WriteByte('\\')
			}
			b.WriteByte(v[j])
		}
	}
	return b.String(), nil
}

// leadingOnly reports whether the first part is the only omissible one.
func leadingOnly(parts []KeyPart) bool {
	for _, k := range parts[1:] {
		if k.omissible() {
			return false
		}
	}
	return true
}

func (k KeyPart) extract(req *Request) (string, error) {
	if ok, err := allHold(k.When, req); err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrMissingKey, k, unreadablePart{err})
	} else if !ok {
		return "", nil
	}
	name := k.Name
	v, ok, err := req.Value(k.Source, name)
	for _, f := range k.Fallback {
		if err != nil || (ok && v != "") {
			break
		}
		name = f
		v, ok, err = req.Value(k.Source, f)
	}
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrMissingKey, k, unreadablePart{err})
	}
	if (!ok || v == "") && k.Optional {
		return "", nil
	}
	if !ok || v == "" {
		return "", fmt.Errorf("%w: %s absent or empty", ErrMissingKey, k)
	}
	if len(v) > maxKeyPart {
		return "", fmt.Errorf("%w: %s longer than %d bytes", ErrBadKey, k, maxKeyPart)
	}
	if !utf8.ValidString(v) {
		return "", fmt.Errorf("%w: %s is not valid UTF-8", ErrBadKey, k)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return "", fmt.Errorf("%w: %s holds a control character", ErrBadKey, k)
		}
	}
	if k.Labelled {
		return name + "=" + v, nil
	}
	return v, nil
}
