package contract

import (
	"strconv"

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
			eachJSON("", root, 0, fn)
		}
		return
	}
	if f, err := q.Form(); err == nil {
		f.Each("", fn)
	}
}

func eachJSON(path string, v gjson.Result, depth int, fn func(name, value string)) {
	switch {
	case v.IsObject() || v.IsArray():
		if depth >= maxFieldDepth {
			fn(path, v.Raw)
			return
		}
		i := 0
		v.ForEach(func(k, e gjson.Result) bool {
			name := k.Str
			if v.IsArray() {
				name = strconv.Itoa(i)
			}
			i++
			if path != "" {
				name = path + "." + name
			}
			eachJSON(name, e, depth+1, fn)
			return true
		})
	case v.Type == gjson.String:
		fn(path, v.Str)
	default:
		fn(path, v.Raw)
	}
}
