package contract

import (
	"errors"
	"fmt"
	"net/http"
)

// compileFrom reads a generic scheme's from list: the places the sender's
// signature (or token) may be, tried in order.
func (c *sigCompiler) compileFrom() []KeyPart {
	if len(c.cfg.From) == 0 {
		c.bad("from", "required for scheme %s: where the sender puts its signature, e.g. [{header: X-Signature}] or [{form: SignatureValue}]", c.cfg.Scheme)
		return nil
	}
	var refs []KeyPart
	for i, f := range c.cfg.From {
		ref, err := compileKeyPart(f)
		if err != nil {
			c.bad(fmt.Sprintf("from[%d]", i), "%v", err)
			continue
		}
		refs = append(refs, ref)
	}
	return refs
}

// describe names a value's place for a 401 reason: "X-Signature header",
// "form field SignatureValue".
func describe(ref KeyPart) string {
	if ref.Source == FromHeader {
		return http.CanonicalHeaderKey(ref.Name) + " header"
	}
	return string(ref.Source) + " field " + ref.Name
}

// readSignature returns the first value present at refs, and where it was.
// A place whose source the body cannot be (a form field of a JSON body)
// counts as absent; a header sent twice is refused, as no one reading of it
// is safe.
func readSignature(req *Request, refs []KeyPart) (string, KeyPart, error) {
	for _, ref := range refs {
		val, ok, err := req.Value(ref.Source, ref.Name)
		if errors.Is(err, errNotForm) || errors.Is(err, errNotJSON) {
			continue
		}
		if err != nil {
			return "", ref, sigErr("malformed %s: %v", describe(ref), err)
		}
		if ok && val != "" {
			return val, ref, nil
		}
	}
	return "", KeyPart{}, sigErr("no %s", describe(refs[0]))
}
