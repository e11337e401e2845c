package tests

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionFromTheBuild: `hookonce version` of a plain `go build` in this
// checkout names the commit it was built from and a version Go derived from
// it, never a bare "dev"; a release build's -ldflags stamps win; and serve's
// hookonce_build_info carries what `version` prints.
func TestVersionFromTheBuild(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	sha := strings.TrimSpace(string(head))

	t.Run("Unstamped", func(t *testing.T) {
		// GOFLAGS may say -buildvcs=false (this machine's go env does): a
		// plain build that records the checkout is asked for explicitly.
		bin := filepath.Join(t.TempDir(), "hookonce")
		if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build -buildvcs=true: %v\n%s", err, out)
		}
		meta, err := exec.Command("go", "version", "-m", bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(meta), "vcs.revision="+sha) {
			// Go finds no repository in a git worktree (.git is a file).
			t.Skipf("go build recorded no revision for this checkout:\n%s", meta)
		}
		version, revision := runVersion(t, bin)
		if version == "dev" || !strings.Contains(version, sha[:12]) {
			t.Errorf("version %q: want Go's pseudo-version of %s", version, sha[:12])
		}
		if revision != sha && revision != sha+"-modified" {
			t.Errorf("revision %q, want %s (or %[2]s-modified)", revision, sha)
		}
	})

	t.Run("Stamped", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "hookonce")
		out, err := exec.Command("go", "build", "-o", bin,
			"-ldflags", "-X main.version=v9.8.7 -X main.revision=feedface", ".").CombinedOutput()
		if err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		if version, revision := runVersion(t, bin); version != "v9.8.7" || revision != "feedface" {
			t.Errorf("version %q revision %q, want the stamps v9.8.7 and feedface", version, revision)
		}
	})

	t.Run("Metric", func(t *testing.T) {
		version, revision := runVersion(t, binary)
		if revision == "" {
			revision = "unknown"
		}
		body := scrapeServe(t)
		want := `hookonce_build_info{revision="` + revision + `",version="` + version + `"} 1`
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	})
}

// runVersion runs `bin version` and returns the version and revision it
// prints ("" when it prints no revision line).
func runVersion(t *testing.T, bin string) (version, revision string) {
	t.Helper()
	out, code := runBin(t, bin, "version")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || !strings.HasPrefix(lines[0], "hookonce ") || len(lines) > 2 {
		t.Fatalf("%s version: exit %d %q", bin, code, out)
	}
	version = strings.TrimPrefix(lines[0], "hookonce ")
	if len(lines) == 2 {
		var ok bool
		if revision, ok = strings.CutPrefix(lines[1], "revision "); !ok {
			t.Fatalf("%s version: second line %q", bin, lines[1])
		}
	}
	return version, revision
}
