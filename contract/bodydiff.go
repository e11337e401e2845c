package contract

import (
	"encoding/json"
	"net/http"
	"sort"
)

// What ChangedBody compared.
const (
	DiffJSON = "json" // JSON paths (ChangedPaths)
	DiffForm = "form" // form field names as PHP names them
)

// ChangedBody says what differs between the body of a stored request and
// that of a later one under the same event id: kind DiffJSON and the JSON
// paths (ChangedPaths) when both bodies are JSON; kind DiffForm and the
// names of the form fields whose values differ, or that are in one body
// only, when both are forms PHP reads ($_POST, with PHP's names:
// "OrderId", "data[FIELDS][ID]"); kind "" and nil otherwise (or when a
// form cannot be read as PHP would). Sorted, at most 50. Only names, never
// values: they may hold customer data.
func ChangedBody(aMethod string, aHeader http.Header, aBody []byte, bMethod string, bHeader http.Header, bBody []byte) (kind string, changed []string) {
	if json.Valid(aBody) && json.Valid(bBody) {
		return DiffJSON, ChangedPaths(aBody, bBody)
	}
	a := &Request{Method: aMethod, Header: aHeader, Body: aBody}
	b := &Request{Method: bMethod, Header: bHeader, Body: bBody}
	fa, err := a.Form()
	if err != nil {
		return "", nil
	}
	fb, err := b.Form()
	if err != nil {
		return "", nil
	}
	va, vb := map[string]string{}, map[string]string{}
	fa.Each("", func(name, val string) { va[name] = val })
	fb.Each("", func(name, val string) { vb[name] = val })
	for name, x := range va {
		if y, ok := vb[name]; !ok || x != y {
			changed = append(changed, name)
		}
	}
	for name := range vb {
		if _, ok := va[name]; !ok {
			changed = append(changed, name)
		}
	}
	sort.Strings(changed)
	if len(changed) > maxChangedPaths {
		changed = changed[:maxChangedPaths]
	}
	return DiffForm, changed
}
