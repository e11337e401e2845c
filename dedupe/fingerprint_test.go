package dedupe

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// referenceFingerprint is Fingerprint written the straightforward way,
// from its documentation alone: the first 4×MaxFingerprintFields fields
// given, names cut, sorted by name (stable), the last value of a name
// kept, the first MaxFingerprintFields of them, each a uvarint length,
// the name and HMAC-SHA256(key, name 0x00 value) cut to
// FingerprintDigestLen, after the version byte. Fingerprint must answer
// the same bytes: stored fingerprints are compared across versions and
// replicas.
func referenceFingerprint(key []byte, fields [][2]string) []byte {
	if len(key) == 0 {
		return nil
	}
	var fs [][2]string
	for _, f := range fields {
		if len(fs) < 4*MaxFingerprintFields {
			fs = append(fs, [2]string{cut(f[0], MaxFingerprintName), f[1]})
		}
	}
	if len(fs) == 0 {
		return nil
	}
	slices.SortStableFunc(fs, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	var kept [][2]string
	for i, f := range fs {
		if i+1 < len(fs) && fs[i+1][0] == f[0] {
			continue
		}
		kept = append(kept, f)
	}
	if len(kept) > MaxFingerprintFields {
		kept = kept[:MaxFingerprintFields]
	}
	out := []byte{fingerprintVersion}
	for _, f := range kept {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(f[0]))
		m.Write([]byte{0})
		m.Write([]byte(f[1]))
		out = binary.AppendUvarint(out, uint64(len(f[0])))
		out = append(out, f[0]...)
		out = append(out, m.Sum(nil)[:FingerprintDigestLen]...)
	}
	return out
}

func fingerprintOf(key []byte, fields [][2]string) []byte {
	return Fingerprint(key, func(f func(string, string)) {
		for _, kv := range fields {
			f(kv[0], kv[1])
		}
	})
}

// The encoding as it has been stored since issue 43, byte for byte.
func TestFingerprintGolden(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	got := fingerprintOf(key, [][2]string{
		{"type", "order.paid"}, {"object.id", "ord_1042"}, {"object.amount", "10000"},
		{"object.currency", "rub"}, {"type", "order.refunded"}, {"", ""},
	})
	const want = "010012a1441139b9bdf10d6f626a6563742e616d6f756e745a9d06f37a01df1f0f6f626a6563742e63757272656e63791545a9f4e96d4efa096f626a6563742e6964e334ece4610efe2b04747970657ca0717bfbfdda38"
	if hex.EncodeToString(got) != want {
		t.Fatalf("fingerprint\n%x\nwant\n%s", got, want)
	}
	d := DigestField(key, "type", "order.refunded")
	if !bytes.HasSuffix(got, d[:]) {
		t.Fatalf("DigestField %x is not the fingerprint's last digest", d)
	}
}

// Fingerprint answers referenceFingerprint's bytes for any fields: long
// and repeated names, names cut inside a UTF-8 sequence, long values,
// more fields than are kept or collected, keys of several lengths (one
// longer than SHA-256's block), one key after another.
func TestFingerprintAsReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 3))
	str := func(n int) string {
		const alphabet = "abcdefgh.0123[]_é日"
		var b strings.Builder
		for range n {
			b.WriteString(string([]rune(alphabet)[rng.IntN(len([]rune(alphabet)))]))
		}
		return b.String()
	}
	keys := [][]byte{
		bytes.Repeat([]byte{7}, FingerprintKeyLen), []byte("k"), bytes.Repeat([]byte("long key "), 12),
		bytes.Repeat([]byte{9}, FingerprintKeyLen),
	}
	for i := range 400 {
		key := keys[i%len(keys)]
		var fields [][2]string
		n := []int{0, 1, 2, 5, 30, 70, 300}[rng.IntN(7)]
		for range n {
			name := str(rng.IntN(8))
			switch rng.IntN(6) {
			case 0:
				name = str(60 + rng.IntN(20)) // cut, maybe inside a rune
			case 1:
				name = "f" + strconv.Itoa(rng.IntN(4)) // repeated
			}
			value := str(rng.IntN(12))
			if rng.IntN(8) == 0 {
				value = str(100 + rng.IntN(300)) // several blocks
			}
			fields = append(fields, [2]string{name, value})
		}
		got, want := fingerprintOf(key, fields), referenceFingerprint(key, fields)
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d (%d fields, key %d bytes):\n got %x\nwant %x", i, n, len(key), got, want)
		}
		if want != nil {
			for _, f := range mustDecode(t, got) {
				var value string
				for _, kv := range fields[:min(len(fields), 4*MaxFingerprintFields)] {
					if cut(kv[0], MaxFingerprintName) == f.Name {
						value = kv[1]
					}
				}
				if d := DigestField(key, f.Name, value); d != f.Digest {
					t.Fatalf("case %d: DigestField(%q) = %x, the fingerprint has %x", i, f.Name, d, f.Digest)
				}
			}
		}
	}
	if got := fingerprintOf(nil, [][2]string{{"a", "b"}}); got != nil {
		t.Fatalf("no key: %x, want nil", got)
	}
}

func mustDecode(t *testing.T, fp []byte) []FieldDigest {
	t.Helper()
	fs, err := DecodeFingerprint(fp)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// go test ./dedupe -run '^$' -bench Fingerprint -benchmem
func BenchmarkFingerprint(b *testing.B) {
	key := bytes.Repeat([]byte{7}, FingerprintKeyLen)
	for _, n := range []int{5, 40} {
		var fields [][2]string
		for i := range n {
			fields = append(fields, [2]string{"object.field_" + strconv.Itoa(i), "value number " + strconv.Itoa(i*7919)})
		}
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				fingerprintOf(key, fields)
			}
		})
	}
}
