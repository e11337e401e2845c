// Package providersign signs notifications the way payment providers'
// documentation says they do, for tests: T-Bank's Token and Robokassa's
// SignatureValue. It is written from the documentation, apart from the
// code under test (contract's signature schemes), so a test that signs
// with it checks hookonce against the providers' rule rather than against
// itself; its own test holds the documentation's published examples.
// Imported by tests only. deploy/demo/storm keeps its own signers: it
// imports nothing of hookonce's.
package providersign

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// TBankToken is T-Bank's Token: the root's scalar values (strings, as
// they are, booleans as true/false, integers in decimal; nested objects
// and arrays are not signed) and Password, sorted by name, concatenated,
// SHA-256, lower-case hex. A Token among the values is left out, and a
// Password among them is replaced by password.
func TBankToken[V any](password string, root map[string]V) string {
	vals := map[string]string{}
	for k, v := range root {
		switch x := any(v).(type) {
		case string:
			vals[k] = x
		case bool:
			vals[k] = strconv.FormatBool(x)
		case int:
			vals[k] = strconv.Itoa(x)
		}
	}
	delete(vals, "Token")
	vals["Password"] = password
	names := make([]string, 0, len(vals))
	for k := range vals {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		b.WriteString(vals[k])
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// Robokassa is Robokassa's Result URL SignatureValue: OutSum:InvId:Password2,
// then the Shp_ parameters (the prefix in any case) sorted by name in byte
// order as name=value, joined with ":", hashed with newHash (MD5 unless the
// shop chose another), upper-case hex.
func Robokassa(newHash func() hash.Hash, password string, f url.Values) string {
	parts := []string{f.Get("OutSum"), f.Get("InvId"), password}
	var shp []string
	for k := range f {
		if strings.HasPrefix(strings.ToLower(k), "shp_") {
			shp = append(shp, k)
		}
	}
	sort.Strings(shp)
	for _, k := range shp {
		parts = append(parts, k+"="+f.Get(k))
	}
	h := newHash()
	h.Write([]byte(strings.Join(parts, ":")))
	return strings.ToUpper(hex.EncodeToString(h.Sum(nil)))
}
