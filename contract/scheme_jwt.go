package contract

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"path/filepath"
	"regexp"
	"time"

	"github.com/tidwall/gjson"
)

// jwt-es256: the body is a compact JWT (header.payload.signature, each
// base64url without padding) signed with ES256 (ECDSA P-256, SHA-256,
// the signature r||s), as Yandex Pay posts its notifications. The keys
// are the provider's JWKS, pinned by the operator in jwks_file: hookonce
// fetches nothing while it judges a delivery. A token's kid picks its key
// (a kid the file lacks is refused, naming it when it is a plain name, so
// the operator knows to refresh the file when the provider rotates keys);
// exp and iat, in the header or the payload, are judged with tolerance as
// the allowed clock skew (1m by default).
//
// The payload is what the notification says: the jwt source reads key
// parts from it (a gjson path, values as PHP's json_decode prints them),
// and hash mode jwt hashes its canonical form, so a notification signed
// anew for a retry (a new iat, exp and signature) is the same payload.
// Both are read only after the signature passed (Inspect).
const (
	FromJWT Source   = "jwt"
	HashJWT HashMode = "jwt"
)

// DefaultJWTLeeway is the clock skew allowed around a token's exp and iat.
const DefaultJWTLeeway = time.Minute

type jwtVerifier struct {
	keys   []jwk
	leeway time.Duration
}

type jwk struct {
	kid string
	pub *ecdsa.PublicKey
}

// maxJWT bounds the body read as a token (a notification is a few KB).
const maxJWT = 1 << 20

var jwtName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func buildJWT(c *sigCompiler) Verifier {
	v := &jwtVerifier{leeway: DefaultJWTLeeway}
	if c.cfg.Tolerance != nil {
		if t := time.Duration(*c.cfg.Tolerance); t < time.Second {
			c.bad("tolerance", "%s is too short (minimum 1s)", t)
		} else {
			v.leeway = t
		}
	}
	if c.cfg.JWKSFile == "" {
		c.bad("jwks_file", "required: the provider's published keys (JWKS, JSON), saved to a file")
		return v
	}
	path := c.cfg.JWKSFile
	if !filepath.IsAbs(path) && c.dir != "" {
		path = filepath.Join(c.dir, path)
	}
	data, err := readSecretFile(path)
	if err != nil {
		c.bad("jwks_file", "read keys: %v", err)
		return v
	}
	var set struct {
		Keys []struct {
			Kty, Crv, Kid, Alg, Use, X, Y string
		} `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		c.bad("jwks_file", "not a JWKS (JSON with keys): %v", err)
		return v
	}
	for i, k := range set.Keys {
		if k.Kty != "EC" || k.Crv != "P-256" || (k.Alg != "" && k.Alg != "ES256") || (k.Use != "" && k.Use != "sig") {
			continue // another algorithm's key: not ours to use
		}
		x, errX := base64.RawURLEncoding.DecodeString(k.X)
		y, errY := base64.RawURLEncoding.DecodeString(k.Y)
		if errX != nil || errY != nil || len(x) != 32 || len(y) != 32 {
			c.bad("jwks_file", "key %d: x and y are not 32 bytes of base64url", i)
			continue
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			c.bad("jwks_file", "key %d: not a P-256 point", i)
			continue
		}
		v.keys = append(v.keys, jwk{kid: k.Kid, pub: pub})
	}
	if len(v.keys) == 0 && len(c.probs) == 0 {
		c.bad("jwks_file", "no ES256 key (kty EC, crv P-256) in %s", c.cfg.JWKSFile)
	}
	return v
}

// splitJWT returns a compact JWT's decoded header, payload and signature,
// and the signed text (header.payload as sent).
func splitJWT(body []byte) (header, payload, sig, signed []byte, err error) {
	body = bytes.TrimSpace(body)
	if len(body) > maxJWT {
		return nil, nil, nil, nil, errors.New("larger than a token")
	}
	parts := bytes.Split(body, []byte("."))
	if len(parts) != 3 {
		return nil, nil, nil, nil, errors.New("not a compact JWT (three base64url parts)")
	}
	// Strict: one encoding per value, so no two bodies carry one token.
	dec := func(b []byte) ([]byte, error) { return base64.RawURLEncoding.Strict().DecodeString(string(b)) }
	if header, err = dec(parts[0]); err != nil {
		return nil, nil, nil, nil, errors.New("header is not base64url")
	}
	if payload, err = dec(parts[1]); err != nil {
		return nil, nil, nil, nil, errors.New("payload is not base64url")
	}
	if sig, err = dec(parts[2]); err != nil {
		return nil, nil, nil, nil, errors.New("signature is not base64url")
	}
	if !gjson.ValidBytes(header) || !gjson.ValidBytes(payload) {
		return nil, nil, nil, nil, errors.New("header or payload is not JSON")
	}
	return header, payload, sig, body[:len(parts[0])+1+len(parts[1])], nil
}

func (v *jwtVerifier) Verify(req *Request, now time.Time) error {
	header, payload, sig, signed, err := splitJWT(req.Body)
	if err != nil {
		return sigErr("malformed token in the body: %v", err)
	}
	if alg := gjson.GetBytes(header, "alg"); alg.Str != "ES256" {
		return sigErr("unsupported token alg: want ES256")
	}
	if len(sig) != 64 {
		return sigErr("malformed token signature: want 64 bytes (ES256)")
	}
	kid := gjson.GetBytes(header, "kid")
	sum := sha256.Sum256(signed)
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	found, known := false, false
	for _, k := range v.keys {
		if kid.Exists() && k.kid != kid.String() {
			continue
		}
		known = true
		found = ecdsa.Verify(k.pub, sum[:], r, s) || found
	}
	if !known {
		if jwtName.MatchString(kid.String()) {
			return sigErr("no key with the token's kid %s in jwks_file", kid.String())
		}
		return sigErr("no key with the token's kid in jwks_file")
	}
	if !found {
		return sigErr(ReasonMismatch)
	}
	for _, claim := range []string{"exp", "iat"} {
		val := gjson.GetBytes(header, claim)
		if !val.Exists() {
			val = gjson.GetBytes(payload, claim)
		}
		if !val.Exists() {
			continue
		}
		t, ok := parseUnix(val.String())
		if !ok || (val.Type != gjson.Number && val.Type != gjson.String) {
			return sigErr("malformed token %s: want Unix seconds", claim)
		}
		at := time.Unix(t, 0)
		if (claim == "exp" && now.After(at.Add(v.leeway))) || (claim == "iat" && at.After(now.Add(v.leeway))) {
			return sigErr("%s (token %s)", ReasonTolerance, claim)
		}
	}
	return nil
}

// jwtValue reads name, a gjson path, from the payload of the JWT in body,
// exactly as Value reads a JSON body (PHP's json_decode: the last of
// repeated keys wins, numbers as PHP prints them).
func jwtValue(body []byte, name string) (string, bool, error) {
	_, payload, _, _, err := splitJWT(body)
	if err != nil {
		return "", false, fmt.Errorf("body is not a JWT: %w", err)
	}
	return (&Request{Body: payload}).Value(FromBody, name)
}

// jwtPayload returns the decoded payload of the JWT in body, for hash
// mode jwt.
func jwtPayload(body []byte) ([]byte, error) {
	_, payload, _, _, err := splitJWT(body)
	if err != nil {
		return nil, fmt.Errorf("body is not a JWT: %w", err)
	}
	return payload, nil
}

var _ Verifier = (*jwtVerifier)(nil)
