package contract_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/contract/internal/php"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/tidwall/gjson"
)

// referenceJSONFields is EachField's reading of a JSON body written the
// straightforward way (a new string per dotted name): the order and the
// names EachField answers must stay these, as the fingerprints stored
// under them are compared across versions.
func referenceJSONFields(path string, v gjson.Result, depth int, out *[][2]string) {
	switch {
	case v.IsObject() || v.IsArray():
		if depth >= 8 {
			*out = append(*out, [2]string{path, v.Raw})
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
			referenceJSONFields(name, e, depth+1, out)
			return true
		})
	case v.Type == gjson.String:
		*out = append(*out, [2]string{path, v.Str})
	default:
		*out = append(*out, [2]string{path, v.Raw})
	}
}

// collect is every field EachField gives, kept after it returns (so a name
// handed out over a buffer that was then written again would show).
func collect(q *contract.Request) [][2]string {
	var out [][2]string
	q.EachField(func(name, value string) { out = append(out, [2]string{name, value}) })
	return out
}

func TestEachFieldJSONAsReference(t *testing.T) {
	bodies := []string{
		`{"type":"order.paid","object":{"id":"ord_1042","amount":10000,"currency":"rub","customer":"cus_77"}}`,
		`[1,"two",{"three":[3,{"x":null}]},[],{}]`,
		`{"a.b":{"c\"d":"e\u00e9\n"},"a":{"b":{"c":1}},"a":2,"":{"":""}}`,
		`{"l1":{"l2":{"l3":{"l4":{"l5":{"l6":{"l7":{"l8":{"l9":{"l10":1}}},"s":true}}}}}}}`,
		`{"items":[` + strings.Repeat(`{"sku":"x","qty":1},`, 150) + `{"sku":"last"}]}`,
		`"just a string"`, `42`, `null`, `{}`, `[]`,
		// Escapes next to quotes and backslashes; numbers in every form.
		`{"x\\":"y\\\\","z\"":"\"q\\","\/":"\ud83d\ude00\t","n":[1E+5,-0.5e-3,0,-0,true,false,null]}`,
		// Past maxFieldDepth, containers whose strings hold brackets and
		// escaped quotes are given whole.
		`{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":"]}\"[{","j":["}",{"k":"\\"}]},"l":[[[]]]}}}}}}},"m":1}`,
		// bench/compare's webhook.
		fmt.Sprintf(`{"type":"order.paid","variant":%d,"data":{"object":{"id":"ord_123","amount":1999,"currency":"usd","customer":"cus_42","metadata":{"note":%q}}}}`, 0, strings.Repeat("x", 860)),
	}
	// Strings about as long as the length past which EachField looks for
	// their end a word at a time, with escapes before and after it.
	for n := 28; n <= 40; n++ {
		for _, esc := range []string{``, `\"`, `\\`, `\u00e9`} {
			for _, at := range []int{0, 31, 32, 33, n} {
				v := strings.Repeat("v", at) + esc + strings.Repeat("w", n-min(at, n))
				bodies = append(bodies, `{"`+v+`":"`+v+`","x":["`+v+`"]}`)
			}
		}
	}
	rng := rand.New(rand.NewPCG(47, 4))
	for range 300 {
		bodies = append(bodies, randomJSON(rng, 0))
	}
	// The same bodies as people write them: spaces, tabs and line breaks
	// between every token.
	for _, body := range bodies[:len(bodies):len(bodies)] {
		var spaced bytes.Buffer
		if err := json.Indent(&spaced, []byte(body), " \r\n", "\t "); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, spaced.String())
	}
	for _, body := range bodies {
		if !gjson.Valid(body) {
			t.Fatalf("not JSON: %s", body)
		}
		var want [][2]string
		if root := gjson.Parse(body); root.IsObject() || root.IsArray() {
			referenceJSONFields("", root, 0, &want)
		}
		q := delivery(t, "POST", "/hook?x=1&y[z]=2", "application/json", body, "")
		got := collect(q)
		// The query's fields first (in no fixed order), then the body's.
		query := got[:min(2, len(got))]
		slices.SortFunc(query, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
		if fmt.Sprint(query) != "[[x 1] [y[z] 2]]" {
			t.Fatalf("%s: query fields %q", body, query)
		}
		if got := got[2:]; !slices.Equal(got, want) {
			t.Fatalf("%s:\n got %q\nwant %q", body, got, want)
		}
	}
}

func randomJSON(rng *rand.Rand, depth int) string {
	key := func() string {
		return []string{"id", "a", "b.c", "данные", "k\\\"q", "x", "0", ""}[rng.IntN(8)]
	}
	if depth < 11 && rng.IntN(3) != 0 {
		n := rng.IntN(5)
		var parts []string
		if rng.IntN(2) == 0 {
			for range n {
				parts = append(parts, `"`+key()+`":`+randomJSON(rng, depth+1))
			}
			return "{" + strings.Join(parts, ",") + "}"
		}
		for range n {
			parts = append(parts, randomJSON(rng, depth+1))
		}
		if rng.IntN(10) == 0 {
			for range 100 + rng.IntN(20) { // indices past strconv's small numbers
				parts = append(parts, `7`)
			}
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return []string{`"v"`, `"é\u00e9\n"`, `1.50`, `-0`, `true`, `null`, `""`, `1e3`}[rng.IntN(8)]
}

// go test ./contract -run '^$' -bench EachField -benchmem
func BenchmarkEachField(b *testing.B) {
	q := delivery(b, "POST", "/hook", "application/json",
		`{"type":"order.paid","object":{"id":"ord_1042","amount":10000,"currency":"rub","customer":"cus_77","lines":[{"sku":"a","qty":1},{"sku":"b","qty":2}]}}`, "")
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		q.EachField(func(name, value string) { n += len(name) })
	}
}

// go test ./contract -run '^$' -bench DeliveryFingerprint -benchmem
//
// The fingerprint of bench/compare's ~1 KB JSON webhook (seven fields, one
// of them an 860-byte string), as a claim makes it.
func BenchmarkDeliveryFingerprint(b *testing.B) {
	body := fmt.Sprintf(`{"type":"order.paid","variant":%d,"data":{"object":{"id":"ord_123","amount":1999,"currency":"usd","customer":"cus_42","metadata":{"note":%q}}}}`,
		0, strings.Repeat("x", 860))
	key := []byte(strings.Repeat("k", dedupe.FingerprintKeyLen))
	q := delivery(b, "POST", "/hook", "application/json", body, "")
	b.ReportAllocs()
	for b.Loop() {
		dedupe.Fingerprint(key, q.EachField)
	}
}

// FuzzEachFieldJSON: for any body PHP reads as JSON, EachField gives the
// fields gjson's member-by-member walk gives.
// go test ./contract -run '^$' -fuzz FuzzEachFieldJSON -fuzztime 30s
func FuzzEachFieldJSON(f *testing.F) {
	f.Add(`{"a":{"b\"":["x\\",1e3,{"c":null}]}}`)
	f.Add(`[ {"k" : "v" } , [ ] , "\u00e9" ]`)
	f.Add(`{"l1":{"l2":{"l3":{"l4":{"l5":{"l6":{"l7":{"l8":{"l9":"]}\"["}}}}}}}}}`)
	f.Fuzz(func(t *testing.T, body string) {
		if !php.ValidJSON([]byte(body)) {
			return
		}
		var want [][2]string
		if root := gjson.Parse(body); root.IsObject() || root.IsArray() {
			referenceJSONFields("", root, 0, &want)
		}
		if got := collect(delivery(t, "POST", "/hook", "application/json", body, "")); !slices.Equal(got, want) {
			t.Fatalf("%q:\n got %q\nwant %q", body, got, want)
		}
	})
}
