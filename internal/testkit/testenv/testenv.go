// Package testenv holds the one rule for tests that need something outside
// Go (a server binary, a browser, npm packages, the built hookonce): outside
// CI a missing requirement skips the test with how to install it; under CI
// (CI set to anything but "", "false" or "0") it fails the test, since a CI
// image without it is broken and a skip would pass silently.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// CI reports whether the environment says CI.
func CI() bool {
	ci := os.Getenv("CI")
	return ci != "" && ci != "false" && ci != "0"
}

// Missing ends tb for a requirement that is not there: what names it
// (and why it is missing), how says how to get it.
func Missing(tb testing.TB, what, how string) {
	tb.Helper()
	if CI() {
		tb.Fatalf("%s, and CI=%s requires it (%s)", what, os.Getenv("CI"), how)
	}
	tb.Skipf("%s; skipping (%s; CI=true makes this a failure)", what, how)
}

// LookPath returns the path of the first of names found on PATH, or ends
// tb through Missing.
func LookPath(tb testing.TB, how string, names ...string) string {
	tb.Helper()
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	Missing(tb, names[0]+" is not installed", how)
	return ""
}
