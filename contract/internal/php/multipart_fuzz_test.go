package php

import (
	"strings"
	"testing"
)

// FuzzParseMultipart: whatever the body, reading it never panics, a body
// whose shape is not modelled is refused as a whole (no fields), and every
// field read can be looked up again by its own name.
func FuzzParseMultipart(f *testing.F) {
	const ct = "multipart/form-data; boundary=XyZ"
	for _, s := range []string{
		"--XyZ\r\nContent-Disposition: form-data; name=\"id\"\r\n\r\nEVT1\r\n--XyZ--\r\n",
		"--XyZ\r\nContent-Disposition: form-data; name=\"a[b]\"\r\n\r\n1\r\n--XyZ\r\nContent-Disposition: form-data; name=\"a[]\"\r\n\r\n2\r\n--XyZ--\r\n",
		"--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.txt\"\r\nContent-Type: text/plain\r\n\r\nbody\r\n--XyZ--\r\n",
		"--XyZ\r\nContent-Disposition: form-data; name=id\r\n\r\nunquoted\r\n--XyZ--",
		"preamble\r\n--XyZ\r\n\r\nno headers\r\n--XyZ--\r\n",
		"--XyZ\r\nContent-Disposition: form-data; name=\"a.b c\"\r\n\r\nv\n--XyZ--\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		root, bad := ParseMultipart(body, ct)
		if bad != "" {
			return
		}
		if root == nil {
			t.Fatal("no $_POST and no reason")
		}
		root.Each("", func(name, val string) {
			if top, _, _ := strings.Cut(name, "["); strings.ContainsAny(top, " .") {
				t.Fatalf("top-level name %q keeps a space or dot", top)
			}
			if got, ok := root.Lookup(name); !ok || got != val {
				t.Fatalf("field %q = %q, but looking it up gives %q, %v", name, val, got, ok)
			}
		})
	})
}
