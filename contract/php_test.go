package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/internal/testenv"
)

// These tests hold hookonce's reading of query strings, forms and JSON to
// PHP's own: generated inputs are read by php-cli and by this package, and
// the results must be equal (trap 20 in ARCHITECTURE.md).

func needPHP(t testing.TB) string {
	t.Helper()
	return testenv.LookPath(t, "apt-get install php-cli: the PHP reference is not run", "php")
}

// runPHP feeds cases (JSON) to a PHP script on stdin and decodes its JSON
// answer into out.
func runPHP(t *testing.T, script string, cases any, out any) {
	t.Helper()
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(needPHP(t), "-d", "max_input_vars=1000", "-r", script)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	res, err := cmd.Output()
	if err != nil {
		t.Fatalf("php: %v\n%s", err, stderr.String())
	}
	if err := json.Unmarshal(res, out); err != nil {
		t.Fatalf("php answer: %v\n%.500s", err, res)
	}
}

// toPlain turns a parsed phpVar into what json_encode(…, JSON_FORCE_OBJECT)
// gives for PHP's array.
func toPlain(v *phpVar) any {
	if v.arr == nil {
		return v.str
	}
	m := map[string]any{}
	for k, e := range v.arr {
		m[k] = toPlain(e)
	}
	return m
}

// genQuery makes query strings full of the spellings PHP treats specially.
func genQuery(r *rand.Rand) string {
	names := []string{"id", "InvId", "Shp_item", "Shp.item", "Shp item", " id", "a[b]", "a[b][c]",
		"a[]", "a[", "a[b", "a]b", "a[b]x", "data[FIELDS][ID]", "data[FIELDS][ ID]", "id%00x", "i%64",
		"a%5Bb%5D", "x+y", "%20id", "", "a[0]", "a[1]", "a[01]", "a[-1]", "d.e[f.g]", "h[i][j"}
	vals := []string{"", "1", "EVT9", "fa", "a+b", "%41", "%zz", "x=y", "%26", "1.0", "%C3%A9", "%00"}
	n := 1 + r.IntN(8)
	parts := make([]string, n)
	for i := range parts {
		name := names[r.IntN(len(names))]
		switch r.IntN(5) {
		case 0:
			parts[i] = name
		default:
			parts[i] = name + "=" + vals[r.IntN(len(vals))]
		}
	}
	return strings.Join(parts, "&")
}

func TestPHPVarsMatchPHP(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var cases []string
	for range 400 {
		cases = append(cases, genQuery(r))
	}
	cases = append(cases, "id=fa&id=EVT9", "a.b=1&a b=2", "f[]=1&f[]=2&f[5]=3&f[]=4", "g=1&g[h]=2", "g[h]=2&g=1",
		"p[9223372036854775807]=1&p[]=2")
	var want map[string]any
	runPHP(t, `$out = [];
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
		got := toPlain(parsePHPVars(qs))
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

func genNumber(r *rand.Rand) string {
	sign := []string{"", "-"}[r.IntN(2)]
	ints := []string{"0", "1", "7", "10", "42", "123456789012345678", "9223372036854775807", "9223372036854775808",
		"12345678901234567890", "99999999999999", "100000000000000", "1000000000000000"}
	s := sign + ints[r.IntN(len(ints))]
	if r.IntN(2) == 0 {
		s += "." + fmt.Sprint(r.IntN(1000))
		if r.IntN(3) == 0 {
			s += "0"
		}
	}
	if r.IntN(3) == 0 {
		s += []string{"e", "E"}[r.IntN(2)] + []string{"", "+", "-"}[r.IntN(3)] + fmt.Sprint(r.IntN(30))
	}
	return s
}

func TestPHPNumbersMatchPHP(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cases := []string{"1", "1.0", "1e0", "10E-1", "-0", "-0.0", "0.0001", "0.00001", "1e14", "1e13", "1e15",
		"99999999999999.5", "1.5e300", "0.1", "1E+2", "2.5E-5", "123456789012345678", "12345678901234567890", "1e400"}
	for range 400 {
		cases = append(cases, genNumber(r))
	}
	var want []string
	runPHP(t, `$out = [];
foreach (json_decode(file_get_contents("php://stdin"), true) as $lit) { $out[] = (string)json_decode($lit); }
echo json_encode($out);`, cases, &want)
	for i, lit := range cases {
		got, ok := phpNumber(lit)
		if !ok || got != want[i] {
			t.Errorf("%s: got %q (ok %v), php %q", lit, got, ok, want[i])
		}
	}
}

// phpJSONPathScript reads cases {body, path} from stdin and answers, for
// each, what a PHP site gets from json_decode($body, true) at path: the
// string a scalar casts to, or null for nothing readable.
const phpJSONPathScript = `$out = [];
foreach (json_decode(file_get_contents("php://stdin"), true) as $c) {
	$v = json_decode($c["body"], true);
	foreach ($c["path"] as $p) { $v = is_array($v) && array_key_exists($p, $v) ? $v[$p] : null; }
	$out[] = is_string($v) || is_int($v) || is_float($v) ? (string)$v : null;
}
echo json_encode($out);`

// TestJSONValuesMatchPHP: repeated keys, nesting and numbers in a body,
// read by path, against $data[...] after json_decode($body, true).
func TestJSONValuesMatchPHP(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	type jcase struct {
		Body string   `json:"body"`
		Path []string `json:"path"`
	}
	cases := []jcase{
		{`{"id":"dupA","id":"evt_B"}`, []string{"id"}},
		{`{"id":1,"id":1.0}`, []string{"id"}},
		{`{"object":{"id":"p1"},"object":{"status":"x"}}`, []string{"object", "id"}},
		{`{"object":{"id":"p1","id":"p2"}}`, []string{"object", "id"}},
		{`{"id":10E-1}`, []string{"id"}},
	}
	keys := []string{"id", "x", "object"}
	for range 300 {
		var b strings.Builder
		b.WriteString("{")
		n := 1 + r.IntN(4)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%q:", keys[r.IntN(len(keys))])
			switch r.IntN(4) {
			case 0:
				fmt.Fprintf(&b, "%q", fmt.Sprint("v", r.IntN(5)))
			case 1:
				b.WriteString(genNumber(r))
			case 2:
				fmt.Fprintf(&b, `{"id":%s,"id":%q}`, genNumber(r), fmt.Sprint("n", r.IntN(3)))
			default:
				fmt.Fprintf(&b, `{"id":%q}`, fmt.Sprint("m", r.IntN(3)))
			}
		}
		b.WriteString("}")
		path := []string{"id"}
		if r.IntN(2) == 0 {
			path = []string{"object", "id"}
		}
		cases = append(cases, jcase{b.String(), path})
	}
	var want []*string // nil: PHP sees no string (absent, array, null)
	runPHP(t, phpJSONPathScript, cases, &want)
	for i, c := range cases {
		req := &Request{Body: []byte(c.Body)}
		got, ok, err := req.Value(FromBody, strings.Join(c.Path, "."))
		switch {
		case want[i] == nil:
			if ok && err == nil {
				t.Errorf("%s %v: got %q, php sees none", c.Body, c.Path, got)
			}
		case err != nil || !ok || got != *want[i]:
			t.Errorf("%s %v: got %q (ok %v, err %v), php %q", c.Body, c.Path, got, ok, err, *want[i])
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
		v := parsePHPVars(qs)
		v.each("", func(name, val string) {
			if strings.ContainsAny(name, " .") && !strings.Contains(name, "[") {
				t.Fatalf("top-level name %q keeps a space or dot", name)
			}
		})
		if !strings.Contains(qs, "&") && strings.Count(qs, "=") == 1 {
			name, val, _ := strings.Cut(qs, "=")
			if got, ok := v.lookup(phpURLDecode(name)); ok && got != phpURLDecode(val) {
				t.Fatalf("%q: lookup = %q, want %q", qs, got, phpURLDecode(val))
			}
		}
	})
}
