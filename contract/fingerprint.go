package contract

import (
	"strconv"
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
			w := jsonFields{fn: fn}
			w.each("", root, 0)
		}
		return
	}
	if f, err := q.Form(); err == nil {
		f.Each("", fn)
	}
}

// jsonFields walks a JSON body for EachField. The dotted names of nested
// fields are appended to one growing buffer and handed out as strings
// over it (a name is never written again once handed out; a buffer that
// grows moves on to a new array and leaves the old one, still referenced,
// as it was): one allocation for a body's names, not one per field.
type jsonFields struct {
	fn    func(name, value string)
	names []byte
}

func (w *jsonFields) each(path string, v gjson.Result, depth int) {
	switch {
	case v.IsObject() || v.IsArray():
		if depth >= maxFieldDepth {
			w.fn(path, v.Raw)
			return
		}
		array := v.IsArray()
		i := 0
		v.ForEach(func(k, e gjson.Result) bool {
			w.each(w.name(path, k.Str, array, i), e, depth+1)
			i++
			return true
		})
	case v.Type == gjson.String:
		w.fn(path, v.Str)
	default:
		w.fn(path, v.Raw)
	}
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
