package contract

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// PayloadHash returns the lowercase hex SHA-256 that decides "same payload":
// of the raw body, or with hash: json of its canonical form (sorted keys, no
// insignificant whitespace, numbers as written, ignore paths removed).
func (s *Sender) PayloadHash(body []byte) (string, error) {
	if s.Hash == HashJSON {
		canon, err := CanonicalJSON(body, s.Ignore)
		if err != nil {
			return "", err
		}
		body = canon
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:]), nil
}

// CanonicalJSON re-encodes a JSON document with sorted object keys, no
// insignificant whitespace and numbers exactly as written, after removing
// the dotted paths in ignore (a.b.c; a missing path is not an error).
func CanonicalJSON(body []byte, ignore []string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("hash json: body is not JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("hash json: trailing data after the JSON document")
	}
	for _, p := range ignore {
		removePath(v, strings.Split(p, "."))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // maps encode with sorted keys
		return nil, fmt.Errorf("hash json: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func removePath(v any, path []string) {
	m, ok := v.(map[string]any)
	if !ok || len(path) == 0 {
		return
	}
	if len(path) == 1 {
		delete(m, path[0])
		return
	}
	removePath(m[path[0]], path[1:])
}
