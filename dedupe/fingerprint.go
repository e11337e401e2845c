package dedupe

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
	"io"
	"slices"
	"strings"
	"sync"
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
	digestInto(m, name, value)
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
	fb := fpBuffers.Get().(*fpBuffer)
	defer fpBuffers.Put(fb)
	fb.fields = fb.fields[:0]
	each(fb.addFn)
	fields := fb.fields
	defer clear(fields) // drop the references to the request's strings
	if len(fields) == 0 {
		return nil
	}
	// By name (stable: of a name given twice, the last is kept). The
	// fields' indexes are sorted, not the fields: moving a field moves two
	// strings' pointers, each a write barrier while the GC marks.
	order := fb.order[:0]
	for i := range fields {
		order = append(order, uint16(i))
	}
	slices.SortStableFunc(order, func(a, b uint16) int { return strings.Compare(fields[a][0], fields[b][0]) })
	kept := order[:0]
	for i, k := range order {
		if i+1 < len(order) && fields[order[i+1]][0] == fields[k][0] {
			continue // a later value of the same name follows
		}
		kept = append(kept, k)
	}
	fb.order = order
	if len(kept) > MaxFingerprintFields {
		kept = kept[:MaxFingerprintFields]
	}
	size := 1
	for _, k := range kept {
		size += binary.MaxVarintLen16 + len(fields[k][0]) + FingerprintDigestLen
	}
	out := make([]byte, 1, size)
	out[0] = fingerprintVersion
	if fb.mac == nil || !bytes.Equal(fb.key, key) {
		fb.key, fb.mac = bytes.Clone(key), hmac.New(sha256.New, key)
	}
	for _, k := range kept {
		f := fields[k]
		out = binary.AppendUvarint(out, uint64(len(f[0])))
		out = append(out, f[0]...)
		fb.mac.Reset()
		// One Write of the message from a buffer kept with the HMAC: a
		// string or a literal handed to the hash.Hash interface would be
		// copied to the heap, three times a field.
		fb.msg = append(append(append(fb.msg[:0], f[0]...), 0), f[1]...)
		fb.mac.Write(fb.msg)
		out = append(out, fb.mac.Sum(fb.sum[:0])[:FingerprintDigestLen]...)
	}
	if cap(fb.msg) > 64<<10 {
		fb.msg = nil // a huge value is not kept for the next delivery
	}
	return out
}

// fpBuffer is what Fingerprint reuses from one delivery to the next: the
// fields' slice and their order, the callback that fills it (a method value made once,
// not a closure per call), the message buffer and the HMAC under the
// install's key.
type fpBuffer struct {
	fields [][2]string
	order  []uint16 // indexes of fields, sorted by name
	addFn  func(name, value string)
	msg    []byte
	key    []byte
	mac    hash.Hash
	sum    [sha256.Size]byte
}

// add collects one field: the first 4×MaxFingerprintFields given, names
// cut to MaxFingerprintName.
func (fb *fpBuffer) add(name, value string) {
	if len(fb.fields) < 4*MaxFingerprintFields {
		fb.fields = append(fb.fields, [2]string{cut(name, MaxFingerprintName), value})
	}
}

var fpBuffers = sync.Pool{New: func() any {
	fb := &fpBuffer{fields: make([][2]string, 0, 32), msg: make([]byte, 0, 256)}
	fb.addFn = fb.add
	return fb
}}

func digestInto(m hash.Hash, name, value string) {
	io.WriteString(m, name)
	m.Write([]byte{0})
	io.WriteString(m, value)
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
