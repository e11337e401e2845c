package dedupe

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
)

// A fingerprint is what a record keeps of its delivery's fields without
// their values: each field's name (a JSON path, a form or query field as
// PHP names it) with a short keyed digest of its value. Two deliveries
// under one key can then be compared field by field (which fields
// differ), and a value an operator knows can be found (its digest under
// the same key), while the store holds no card number, name or amount:
// a digest is an HMAC with a key of the install (FingerprintKeyer), cut
// to FingerprintDigestLen bytes, so it cannot be reversed by trying the
// few values a field may hold without that key.
//
// Bounds: at most MaxFingerprintFields fields (the first by name), names
// cut to MaxFingerprintName bytes; about 4.7 KB per record at most.
const (
	MaxFingerprintFields = 64
	MaxFingerprintName   = 64
	FingerprintDigestLen = 8
	// fingerprintVersion is the encoding's first byte.
	fingerprintVersion = 1
)

// FieldDigest is one field of a fingerprint.
type FieldDigest struct {
	Name   string
	Digest [FingerprintDigestLen]byte
}

// FingerprintKeyer is implemented by stores that keep the install's
// fingerprint key (every backend; a decorator passes it on). It answers
// the key, made at random and stored on first call, atomically (every
// replica gets the same one); a store opened read-only answers the stored
// key, or ErrNotFound when none was made yet.
type FingerprintKeyer interface {
	FingerprintKey(ctx context.Context) ([]byte, error)
}

// FingerprintKeyLen is the length of an install's fingerprint key.
const FingerprintKeyLen = 32

// DigestField is the digest of one field's value under key: the name is
// part of it, so equal values of two fields do not match.
func DigestField(key []byte, name, value string) [FingerprintDigestLen]byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(name))
	m.Write([]byte{0})
	m.Write([]byte(value))
	var d [FingerprintDigestLen]byte
	copy(d[:], m.Sum(nil))
	return d
}

// Fingerprint builds the fingerprint of the fields each calls back with
// (name, value), digested under key, bounded and sorted by name (a name
// given twice keeps its last value). nil when there are none.
func Fingerprint(key []byte, each func(func(name, value string))) []byte {
	if len(key) == 0 {
		return nil
	}
	vals := map[string]string{}
	each(func(name, value string) {
		name = cut(name, MaxFingerprintName)
		if _, ok := vals[name]; ok || len(vals) < 4*MaxFingerprintFields {
			vals[name] = value
		}
	})
	if len(vals) == 0 {
		return nil
	}
	names := make([]string, 0, len(vals))
	for n := range vals {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) > MaxFingerprintFields {
		names = names[:MaxFingerprintFields]
	}
	out := []byte{fingerprintVersion}
	for _, n := range names {
		out = binary.AppendUvarint(out, uint64(len(n)))
		out = append(out, n...)
		d := DigestField(key, n, vals[n])
		out = append(out, d[:]...)
	}
	return out
}

// ErrFingerprint: a stored fingerprint cannot be read.
var ErrFingerprint = errors.New("fingerprint: malformed")

// DecodeFingerprint reads a fingerprint as Fingerprint made it; nil for
// none.
func DecodeFingerprint(b []byte) ([]FieldDigest, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if b[0] != fingerprintVersion {
		return nil, ErrFingerprint
	}
	b = b[1:]
	var out []FieldDigest
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > MaxFingerprintName || uint64(len(b)-k) < n+FingerprintDigestLen {
			return nil, ErrFingerprint
		}
		b = b[k:]
		f := FieldDigest{Name: string(b[:n])}
		copy(f.Digest[:], b[n:n+FingerprintDigestLen])
		out = append(out, f)
		b = b[n+FingerprintDigestLen:]
	}
	return out, nil
}

// ChangedFields lists the fields whose digests differ between two
// fingerprints, or that only one of them has, sorted; nil when either is
// missing or unreadable (nothing can be said).
func ChangedFields(a, b []byte) []string {
	fa, err1 := DecodeFingerprint(a)
	fb, err2 := DecodeFingerprint(b)
	if err1 != nil || err2 != nil || fa == nil || fb == nil {
		return nil
	}
	m := make(map[string][FingerprintDigestLen]byte, len(fa))
	for _, f := range fa {
		m[f.Name] = f.Digest
	}
	var out []string
	for _, f := range fb {
		d, ok := m[f.Name]
		if !ok || d != f.Digest {
			out = append(out, f.Name)
		}
		delete(m, f.Name)
	}
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// FingerprintHas reports whether the fingerprint holds value under key in
// a field whose name is field, or, when field is "", in any field: how
// an operator finds a payment by a value of its request (the shop's
// order number) that is not part of its key.
func FingerprintHas(fp, key []byte, field, value string) bool {
	fs, err := DecodeFingerprint(fp)
	if err != nil {
		return false
	}
	for _, f := range fs {
		if field != "" && !strings.EqualFold(f.Name, field) {
			continue
		}
		if hmac.Equal(f.Digest[:], func() []byte { d := DigestField(key, f.Name, value); return d[:] }()) {
			return true
		}
	}
	return false
}

// StoredFingerprintKeyer is implemented by a store's read-only handle:
// the install's key as stored, ErrNotFound when none was made yet; it
// writes nothing. ReadOnly passes it on as FingerprintKey.
type StoredFingerprintKeyer interface {
	StoredFingerprintKey(ctx context.Context) ([]byte, error)
}

// FingerprintKey of a read-only store reads the stored key and makes
// none.
func (r readOnly) FingerprintKey(ctx context.Context) ([]byte, error) {
	if k, ok := r.Reader.(StoredFingerprintKeyer); ok {
		return k.StoredFingerprintKey(ctx)
	}
	return nil, ErrNotFound
}
