package contract_test

import (
	"strings"
	"testing"

	"github.com/hookonce/hookonce/contract"
)

// Config errors speak the file's language: a misspelt setting, preset or
// choice gets a "did you mean", every problem names file:line, sender and
// field, no message names a Go type, and a value written in the wrong
// place is never quoted (it may be a secret).
func TestConfigErrorsInTheOperatorsWords(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		want       []string
	}{
		{"misspelt settings", `senders:
  - name: a
    presett: robokassa
    match: { path: /a, whne: [] }
    key: [ { from: id } ]
    signature: { secret_evn: X }
defualts: {}
`, []string{
			`x.yaml:3: sender "a": field presett: unknown setting "presett" (did you mean "preset"?)`,
			`x.yaml:4: sender "a": field match.whne: unknown setting "whne" (did you mean "when"?)`,
			`x.yaml:5: sender "a": field key[0].from: unknown setting "from" (did you mean "form"?)`,
			`x.yaml:6: sender "a": field signature.secret_evn: unknown setting "secret_evn" (did you mean "secret_env"?)`,
			`x.yaml:7: field defualts: unknown setting "defualts" (did you mean "defaults"?)`,
		}},
		{"a setting nothing is near lists the known ones", "site:\n  indexes_of_dirs: [a.php]\n",
			[]string{`x.yaml:2: field site.indexes_of_dirs: unknown setting "indexes_of_dirs" (known here: extensions, index, multiviews, request)`}},
		{"a misspelt preset is the first problem, and alone", `senders:
  - name: rk
    match: { path: /a }
    preset: robokasa
    signature: { secret_env: HOOKONCE_TEST_NOT_NEEDED }
`, []string{`x.yaml:4: sender "rk": field preset: unknown preset "robokasa" (did you mean "robokassa"?) (known: `}},
		{"wrong kinds of value", `senders:
  - name: a
    match: { path: /a }
    key: [ { form: id } ]
    store_request_body: maybe
    conflict: { status: abc }
    signature: whsec_c2VjcmV0LXZhbHVl
`, []string{
			`x.yaml:5: sender "a": field store_request_body: want true or false, not a string`,
			`x.yaml:6: sender "a": field conflict.status: want a number, not a string`,
			`x.yaml:7: sender "a": field signature: want a mapping (name: value), not a string`,
		}},
		{"misspelt choices", `senders:
  - name: a
    match: { path: /a, when: [ { form: x, present: true } ] }
    key: [ { form: id } ]
    in_progress: wiat
paths:
  /a: { unmatched: rejct }
`, []string{
			`x.yaml:5: sender "a": field in_progress: "wiat": want one of wait, reject (did you mean "wait"?)`,
			`x.yaml:7: field paths./a.unmatched: "rejct": want reject or pass (did you mean "reject"?)`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := contract.Parse([]byte(tt.yaml), "x.yaml")
			if err == nil {
				t.Fatal("parsed")
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("missing %q in:\n%s", w, msg)
				}
			}
			if tt.name == "a misspelt preset is the first problem, and alone" && strings.Count(msg, "\n") != 0 {
				t.Errorf("problems that follow from the unknown preset are reported too:\n%s", msg)
			}
			for _, bad := range []string{"contract.", "senderFile", "not found in type", "whsec_", "!!str", "unmarshal"} {
				if strings.Contains(msg, bad) {
					t.Errorf("the message says %q:\n%s", bad, msg)
				}
			}
		})
	}
}
