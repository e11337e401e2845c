package contract

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzCanonicalJSON: whatever the body, canonicalising never panics and
// what it accepts comes out as valid JSON; for valid UTF-8 that output is
// its own canonical form (so a stored hash of it matches again), and the
// same document respelled (keys in another order, other whitespace) gives
// the same bytes.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,null,"x"]}`,
		`{"id":"evt","id":"dup","n":1.50,"big":12345678901234567890}`,
		`{"html":"<a href=\"x\">&</a>","u":"\u00e9\ud83d\ude00"}`,
		`[1, {"z": {}, "y": []}]`,
		`"just a string"`,
		`{"a":{"b":{"c":1}},"pending_webhooks":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := CanonicalJSON(body, []string{"pending_webhooks", "a.b.c"})
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("canonical form of %q is not JSON: %q", body, out)
		}
		if !utf8.Valid(body) {
			// Invalid UTF-8 comes out as \ufffd escapes, as encoding/json
			// writes it (stored hashes depend on that), and a real U+FFFD
			// comes out raw: such forms are not their own canonical form.
			return
		}
		again, err := CanonicalJSON(out, nil)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("canonical form %q is not its own canonical form: %q, %v", out, again, err)
		}
		// The same document respelled by encoding/json (other key order
		// for objects decoded into maps is sorted; whitespace added).
		var v any
		d := json.NewDecoder(bytes.NewReader(out))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return
		}
		indented, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return
		}
		if re, err := CanonicalJSON(indented, nil); err != nil || !bytes.Equal(re, out) {
			t.Fatalf("respelled %q gives %q (%v), want %q", indented, re, err, out)
		}
	})
}
