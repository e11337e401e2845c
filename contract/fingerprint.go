package contract

import (
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// maxFieldDepth bounds how deep EachField follows a JSON body.
const maxFieldDepth = 8

// EachField calls fn with every field of the delivery as the site reads
// it, name and value: the query's fields and the body's (a form's fields
// by their PHP names, a JSON body's leaves by their dotted paths, array
// items by index, as ChangedPaths names them). Headers are left out. A
// body field of the same name as a query field comes after it. For the
// delivery's fingerprint (dedupe.Fingerprint), which keeps names and
// keyed digests of the values, never the values.
func (q *Request) EachField(fn func(name, value string)) {
	if q.RawQuery != "" {
		q.queryVars().Each("", fn)
	}
	if root, err := q.jsonRoot(); err == nil {
		if root.IsObject() || root.IsArray() {
			w := jsonFields{fn: fn, doc: root.Raw}
			w.container("", 0, 0)
		}
		return
	}
	if f, err := q.Form(); err == nil {
		f.Each("", fn)
	}
}

// jsonFields walks a JSON body for EachField, in one pass over its bytes:
// the fields, names and values, that gjson's ForEach gives member by member
// (a string's value unescaped, any other leaf's and a container's past
// maxFieldDepth as its raw text), without parsing each nested container
// again at every level above it (gjson reads an object's whole text to
// find its end, then again to walk it: a long value deep in the body was
// read once per level). The body is valid JSON (jsonRoot), so the walk
// does not validate it; it stops at anything it does not expect.
//
// The dotted names of nested fields are appended to one growing buffer
// and handed out as strings over it (a name is never written again once
// handed out; a buffer that grows moves on to a new array and leaves the
// old one, still referenced, as it was): one allocation for a body's
// names, not one per field.
type jsonFields struct {
	fn    func(name, value string)
	doc   string // the body from its first container on
	names []byte
}

// container walks the object or array at doc[i] as the field path at
// depth, and answers where it ends.
func (w *jsonFields) container(path string, i, depth int) int {
	s := w.doc
	array := s[i] == '['
	i++
	for n := 0; ; n++ {
		i = skipSpace(s, i)
		if i >= len(s) || s[i] == ']' || s[i] == '}' {
			return i + 1
		}
		var key string
		if !array {
			if s[i] != '"' {
				return len(s)
			}
			i, key = jsonString(s, i)
			i = skipSpace(s, i)
			if i >= len(s) || s[i] != ':' {
				return len(s)
			}
			i = skipSpace(s, i+1)
			if i >= len(s) {
				return len(s)
			}
		}
		i = w.value(w.name(path, key, array, n), i, depth+1)
		if i = skipSpace(s, i); i < len(s) && s[i] == ',' {
			i++
		}
	}
}

// value gives the field path whose value starts at doc[i] (nested at
// depth), and answers where it ends.
func (w *jsonFields) value(path string, i, depth int) int {
	s := w.doc
	switch s[i] {
	case '{', '[':
		if depth < maxFieldDepth {
			return w.container(path, i, depth)
		}
		end := skipContainer(s, i)
		w.fn(path, s[i:end])
		return end
	case '"':
		end, str := jsonString(s, i)
		w.fn(path, str)
		return end
	}
	end := i + 1 // a number, true, false or null: up to the next delimiter
	for end < len(s) && s[end] > ' ' && s[end] != ',' && s[end] != ']' && s[end] != '}' {
		end++
	}
	w.fn(path, s[i:end])
	return end
}

// jsonString reads the string at s[i] (its opening quote) and answers
// where it ends and its value: the text between the quotes, or, when it
// holds an escape, gjson's unescaped copy (as gjson reads a key or a
// string value).
func jsonString(s string, i int) (int, string) {
	start := i
	for i++; i < len(s); i++ {
		switch s[i] {
		case '"':
			return i + 1, s[start+1 : i]
		case '\\':
			for ; i < len(s); i++ {
				switch s[i] {
				case '\\':
					i++ // the escaped byte
				case '"':
					return i + 1, gjson.Parse(s[start : i+1]).Str
				}
			}
			return len(s), s[start+1:]
		}
		if i-start == longString {
			// A long string (most hold no escape): its end is the next
			// quote, found, with the absence of a backslash before it, a
			// word at a time rather than a byte.
			rest := s[i+1:]
			if q := strings.IndexByte(rest, '"'); q >= 0 && strings.IndexByte(rest[:q], '\\') < 0 {
				return i + q + 2, s[start+1 : i+1+q]
			}
		}
	}
	return len(s), s[start+1:]
}

// longString is the length past which jsonString looks for a string's
// end with strings.IndexByte: below it, its two calls cost more than the
// bytes they skip.
const longString = 32

// skipContainer answers where the object or array at s[i] ends (after its
// closing bracket).
func skipContainer(s string, i int) int {
	depth := 0
	for ; i < len(s); i++ {
		switch s[i] {
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
		case '"':
			i, _ = skipString(s, i)
			i--
		}
	}
	return len(s)
}

// skipString answers where the string at s[i] ends.
func skipString(s string, i int) (int, bool) {
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return len(s), false
}

func skipSpace(s string, i int) int {
	for i < len(s) && s[i] <= ' ' {
		i++
	}
	return i
}

// name is the path of a member (key) or an array item (index i) of path.
func (w *jsonFields) name(path, key string, array bool, i int) string {
	if path == "" {
		if array {
			return strconv.Itoa(i)
		}
		return key // the body's own bytes (or gjson's unescaped copy)
	}
	if w.names == nil {
		w.names = make([]byte, 0, 256)
	}
	start := len(w.names)
	w.names = append(w.names, path...)
	w.names = append(w.names, '.')
	if array {
		w.names = strconv.AppendInt(w.names, int64(i), 10)
	} else {
		w.names = append(w.names, key...)
	}
	return unsafe.String(&w.names[start], len(w.names)-start)
}
