// Package phptest runs php-cli for tests that hold hookonce's reading of
// request data to PHP's own (trap 20 in ARCHITECTURE.md).
package phptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/internal/testkit/testenv"
)

// Need returns the php binary's path, or ends t by the testenv rule.
func Need(t testing.TB) string {
	t.Helper()
	return testenv.LookPath(t, "apt-get install php-cli: the PHP reference is not run", "php")
}

// Run feeds cases (JSON) to a PHP script on stdin and decodes its JSON
// answer into out.
func Run(t *testing.T, script string, cases any, out any) {
	t.Helper()
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Need(t), "-d", "max_input_vars=1000", "-r", script)
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

func GenNumber(r *rand.Rand) string {
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

// GenQuery makes query strings full of the spellings PHP treats specially.
func GenQuery(r *rand.Rand) string {
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
