package contract

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/contract/internal/php/phptest"
)

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
				b.WriteString(phptest.GenNumber(r))
			case 2:
				fmt.Fprintf(&b, `{"id":%s,"id":%q}`, phptest.GenNumber(r), fmt.Sprint("n", r.IntN(3)))
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
	phptest.Run(t, phpJSONPathScript, cases, &want)
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
