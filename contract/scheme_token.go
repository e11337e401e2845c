package contract

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
	"time"
)

// A shared token (Bitrix24's application_token) and HTTP Basic compare a
// secret the sender sends as it is. Both compare SHA-256 sums of the two
// values, so the comparison takes the same time whatever the lengths and
// wherever they first differ.

// tokenVerifier checks a shared token in a field or header.
type tokenVerifier struct {
	from []KeyPart
	sums [][sha256.Size]byte // of the current and previous secret
}

func buildToken(c *sigCompiler) Verifier {
	return &tokenVerifier{from: c.compileFrom(), sums: secretSums(c.keys)}
}

func (v *tokenVerifier) Verify(req *Request, _ time.Time) error {
	raw, _, err := readSignature(req, v.from)
	if err != nil {
		return err
	}
	return matchSum(v.sums, []byte(raw))
}

// basicVerifier checks Authorization: Basic against user:password secrets.
type basicVerifier struct {
	sums [][sha256.Size]byte
}

func buildBasic(c *sigCompiler) Verifier {
	for i, k := range c.keys {
		if !bytes.Contains(k, []byte(":")) {
			c.bad(c.keyFields[i], "scheme basic wants the secret as user:password")
		}
	}
	return &basicVerifier{sums: secretSums(c.keys)}
}

func (v *basicVerifier) Verify(req *Request, _ time.Time) error {
	h, ok, err := req.Value(FromHeader, "Authorization")
	switch {
	case err != nil:
		return sigErr("malformed Authorization header: %v", err)
	case !ok || h == "":
		return sigErr("no Authorization header")
	}
	scheme, cred, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Basic") {
		return sigErr("malformed Authorization header: want Basic")
	}
	userPass, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return sigErr("malformed Authorization header: want Basic with base64 of user:password")
	}
	return matchSum(v.sums, userPass)
}

func secretSums(keys [][]byte) [][sha256.Size]byte {
	sums := make([][sha256.Size]byte, len(keys))
	for i, k := range keys {
		sums[i] = sha256.Sum256(k)
	}
	return sums
}

func matchSum(sums [][sha256.Size]byte, got []byte) error {
	sum := sha256.Sum256(got)
	ok := 0
	for _, want := range sums { // every secret compared: the time tells none
		ok |= subtle.ConstantTimeCompare(sum[:], want[:])
	}
	if ok == 1 {
		return nil
	}
	return sigErr(ReasonMismatch)
}

var (
	_ Verifier = (*tokenVerifier)(nil)
	_ Verifier = (*basicVerifier)(nil)
)
