package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/contract/internal/php/phptest"
)

// oldCanonicalJSON is CanonicalJSON as it was before it walked the
// document in place (decode into maps, encode again): the reference the
// new one must equal byte for byte, or stored hash: json records would
// stop matching their retries.
func oldCanonicalJSON(body []byte, ignore []string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data")
	}
	for _, p := range ignore {
		oldRemovePath(v, strings.Split(p, "."))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func oldRemovePath(v any, path []string) {
	m, ok := v.(map[string]any)
	if !ok || len(path) == 0 {
		return
	}
	if len(path) == 1 {
		delete(m, path[0])
		return
	}
	oldRemovePath(m[path[0]], path[1:])
}

func genJSON(r *rand.Rand, depth int) string {
	strs := []string{`"a"`, `"b"`, `"<&>"`, `"\u00e9\n\t"`, `"\ud83d\ude00"`, `"x\"y\\z"`, `""`, `"\u2028"`, `"\u0001"`, `"é"`, `"\/"`}
	keys := []string{`"a"`, `"b"`, `"id"`, `""`, `"é"`, `"a.b"`, `"<k>"`, `"\u0061"`}
	switch k := r.IntN(8); {
	case depth > 3 || k < 2:
		return strs[r.IntN(len(strs))]
	case k < 4:
		return []string{"0", "-0", "1.50", "1e3", "10E-1", "123456789012345678901234567890", "-2.5e-7", "true", "false", "null"}[r.IntN(10)]
	case k < 6:
		var parts []string
		for range r.IntN(4) {
			parts = append(parts, genJSON(r, depth+1))
		}
		return "[" + strings.Join(parts, ",") + "]"
	default:
		var parts []string
		for range r.IntN(5) {
			parts = append(parts, keys[r.IntN(len(keys))]+":"+genJSON(r, depth+1))
		}
		return "{" + strings.Join(parts, " , ") + "}"
	}
}

func TestCanonicalJSONUnchanged(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 1))
	ignores := [][]string{nil, {"a"}, {"a.b"}, {"b", "id"}, {"a.a.a"}, {""}}
	for i := range 5000 {
		doc := genJSON(r, 0)
		if r.IntN(10) == 0 {
			doc = " \n" + doc + "\t"
		}
		ig := ignores[r.IntN(len(ignores))]
		want, werr := oldCanonicalJSON([]byte(doc), ig)
		got, gerr := CanonicalJSON([]byte(doc), ig)
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("case %d %s ignore %q:\n got %s (%v)\nwant %s (%v)", i, doc, ig, got, gerr, want, werr)
		}
	}
	for _, bad := range []string{``, `{`, `{"a":1} x`, `{"a":1}{}`, `nul`, `[1,]`} {
		if _, err := CanonicalJSON([]byte(bad), nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestJSONEdgesMatchPHP: documents json_decode refuses (too deep, half a
// surrogate pair) are no JSON to hookonce either; escaped-dot and array
// paths read what PHP reads.
func TestJSONEdgesMatchPHP(t *testing.T) {
	type jcase struct {
		Body string   `json:"body"`
		Path []string `json:"path"`
		hook string
	}
	nest := func(n int) string {
		return `{"id":` + strings.Repeat("[", n-1) + `"deep"` + strings.Repeat("]", n-1) + `,"x":"top"}`
	}
	cases := []jcase{
		{nest(511), []string{"x"}, "x"},
		{nest(512), []string{"x"}, "x"},
		{`{"x":"\ud800"}`, []string{"x"}, "x"},
		{`{"x":"\udc00","y":"1"}`, []string{"y"}, "y"},
		{`{"x":"\ud83d\ude00","y":"1"}`, []string{"x"}, "x"},
		{`{"x":"\ud83dx"}`, []string{"x"}, "x"},
		{`{"a.b":"dot","a":{"b":"nested"}}`, []string{"a.b"}, `a\.b`},
		{`{"a.b":"dot","a":{"b":"nested"}}`, []string{"a", "b"}, `a.b`},
		{`{"items":[{"id":"i0"},{"id":"i1","id":"i1b"}]}`, []string{"items", "1", "id"}, "items.1.id"},
		{`{"items":{"1":{"id":"obj"}}}`, []string{"items", "1", "id"}, "items.1.id"},
		{`{"a":"s","a":{"b":"t"}}`, []string{"a", "b"}, "a.b"},
		{`{"a":{"b":"t"},"a":"s"}`, []string{"a", "b"}, "a.b"},
		{` {"id" : 7 } `, []string{"id"}, "id"},
		{`{"id":"\u0000x"}`, []string{"id"}, "id"},
	}
	var want []*string
	phptest.Run(t, phpJSONPathScript, cases, &want)
	for i, c := range cases {
		req := &Request{Body: []byte(c.Body)}
		got, ok, err := req.Value(FromBody, c.hook)
		switch {
		case want[i] == nil:
			if ok && err == nil {
				t.Errorf("case %d %.60s %s: got %q, php sees none", i, c.Body, c.hook, got)
			}
		case err != nil || !ok || got != *want[i]:
			t.Errorf("case %d %.60s %s: got %q (ok %v, err %v), php %q", i, c.Body, c.hook, got, ok, err, *want[i])
		}
	}
}
