package php

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/contract/internal/php/phptest"
)

// These tests hold hookonce's reading of query strings, forms and JSON to
// PHP's own: generated inputs are read by php-cli and by this package, and
// the results must be equal (trap 20 in ARCHITECTURE.md).

func TestPHPVarsMatchPHP(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var cases []string
	for range 400 {
		cases = append(cases, phptest.GenQuery(r))
	}
	cases = append(cases, "id=fa&id=EVT9", "a.b=1&a b=2", "f[]=1&f[]=2&f[5]=3&f[]=4", "g=1&g[h]=2", "g[h]=2&g=1",
		"p[9223372036854775807]=1&p[]=2")
	var want map[string]any
	phptest.Run(t, `$out = [];
foreach (json_decode(file_get_contents("php://stdin"), true) as $qs) {
	parse_str($qs, $o);
	$out[] = json_decode(json_encode($o, JSON_FORCE_OBJECT | JSON_INVALID_UTF8_SUBSTITUTE), true);
}
echo json_encode($out, JSON_FORCE_OBJECT | JSON_INVALID_UTF8_SUBSTITUTE);`, cases, &want)
	// JSON_FORCE_OBJECT makes the outer list an object too.
	if len(want) != len(cases) {
		t.Fatalf("php answered %d results for %d cases", len(want), len(cases))
	}
	for i, qs := range cases {
		got := Plain(ParseQuery(qs))
		// Both sides through JSON, so invalid UTF-8 is substituted alike.
		gotJSON, _ := json.Marshal(got)
		var gotNorm any
		_ = json.Unmarshal(gotJSON, &gotNorm)
		w := want[fmt.Sprint(i)]
		if w == nil {
			w = map[string]any{}
		}
		if !reflect.DeepEqual(gotNorm, w) {
			t.Errorf("%q:\n got %v\nphp %v", qs, gotNorm, w)
		}
	}
}

func TestPHPNumbersMatchPHP(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cases := []string{"1", "1.0", "1e0", "10E-1", "-0", "-0.0", "0.0001", "0.00001", "1e14", "1e13", "1e15",
		"99999999999999.5", "1.5e300", "0.1", "1E+2", "2.5E-5", "123456789012345678", "12345678901234567890", "1e400"}
	for range 400 {
		cases = append(cases, phptest.GenNumber(r))
	}
	var want []string
	phptest.Run(t, `$out = [];
foreach (json_decode(file_get_contents("php://stdin"), true) as $lit) { $out[] = (string)json_decode($lit); }
echo json_encode($out);`, cases, &want)
	for i, lit := range cases {
		got, ok := Number(lit)
		if !ok || got != want[i] {
			t.Errorf("%s: got %q (ok %v), php %q", lit, got, ok, want[i])
		}
	}
}

// FuzzPHPVars: whatever the input, parsing never panics, a name looked up
// finds what was registered last under it, and every flattened field can
// be looked up by its own name.
func FuzzPHPVars(f *testing.F) {
	for _, s := range []string{"id=fa&id=EVT9", "a[b][c]=1&a[]=2", "a[=1", "%00=1", "a.b c=1", "p[9223372036854775807]=1&p[]=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, qs string) {
		v := ParseQuery(qs)
		v.Each("", func(name, val string) {
			if strings.ContainsAny(name, " .") && !strings.Contains(name, "[") {
				t.Fatalf("top-level name %q keeps a space or dot", name)
			}
		})
		if !strings.Contains(qs, "&") && strings.Count(qs, "=") == 1 {
			name, val, _ := strings.Cut(qs, "=")
			if got, ok := v.Lookup(URLDecode(name)); ok && got != URLDecode(val) {
				t.Fatalf("%q: lookup = %q, want %q", qs, got, URLDecode(val))
			}
		}
	})
}
