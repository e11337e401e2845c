package contract

import "testing"

// The allocation-free fast path of NormalizePath answers only for paths
// the full normalisation leaves as they are.
func FuzzNormalizeFastPath(f *testing.F) {
	for _, s := range []string{"/", "/a/b.php", "//a", "/a/./b", "/a/../b", "/a/", "/a%2Fb", "/.", "/..", "/a/.b", "/a/..b", "/a\x00b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if !isNormal(p) {
			return
		}
		got, err := normalize(p)
		if err != nil || got != p {
			t.Fatalf("isNormal(%q) but normalize gives %q, %v", p, got, err)
		}
	})
}
