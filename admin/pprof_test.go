package admin_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Profiles are served behind the token, and not at all without one; the
// command line (which may carry a DSN's password) never.
func TestProfilingBehindTheToken(t *testing.T) {
	f := newFixture(t, testToken)
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=1", "/debug/pprof/profile?seconds=1"} {
		if r := do(t, http.MethodGet, f.srv.URL+p, ""); r.status != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d, want 401", p, r.status)
		}
		if r := do(t, http.MethodGet, f.srv.URL+p, "wrong"); r.status != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d, want 401", p, r.status)
		}
	}
	// A CPU profile and a heap profile are real profiles (gzipped protobuf).
	for _, p := range []string{"/debug/pprof/profile?seconds=1", "/debug/pprof/heap"} {
		r := do(t, http.MethodGet, f.srv.URL+p, testToken)
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", p, r.status, r.body)
		}
		zr, err := gzip.NewReader(bytes.NewReader(r.body))
		if err != nil {
			t.Fatalf("%s: not a gzipped profile: %v", p, err)
		}
		if b, err := io.ReadAll(zr); err != nil || len(b) == 0 {
			t.Fatalf("%s: empty profile: %v", p, err)
		}
	}
	if r := do(t, http.MethodGet, f.srv.URL+"/debug/pprof/goroutine?debug=1", testToken); r.status != 200 || !strings.Contains(string(r.body), "goroutine profile:") {
		t.Fatalf("goroutine dump: %d", r.status)
	}
	if r := do(t, http.MethodGet, f.srv.URL+"/debug/pprof/cmdline", testToken); r.status != http.StatusNotFound {
		t.Fatalf("cmdline: %d, want 404 (it may carry a password)", r.status)
	}

	open := newFixture(t, "")
	if r := do(t, http.MethodGet, open.srv.URL+"/debug/pprof/heap", ""); r.status != http.StatusNotFound {
		t.Fatalf("heap with no token configured: %d, want 404", r.status)
	}
}
