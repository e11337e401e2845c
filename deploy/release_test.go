package deploy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Releases (deploy/release.sh) and their versions
// (deploy/packages/version.sh).

func pkgVersion(t *testing.T, v string) string {
	t.Helper()
	out, err := exec.Command("packages/version.sh", "--package", v).CombinedOutput()
	if err != nil {
		t.Fatalf("version.sh --package %s: %v\n%s", v, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestPackageVersionsSortByTime: the versions builds get, in the order
// they are made, sort in that order for dpkg and for rpm, so an upgrade is
// never a downgrade: a release, untagged builds after it (by time, whatever
// their commit hash), a pre-release of the next, the next.
func TestPackageVersionsSortByTime(t *testing.T) {
	needTool(t, "bash", true)
	order := []string{
		"1.0.0",
		"1.0.0+git20261202041500.fff9999",
		"1.0.0+git20261202041501.0000000",
		"1.0.0+git20261202041501.0000000.dirty",
		"1.0.0+git20261203000000.abc1234",
		"1.0.1",
		"1.0.1+git20261210000000.1234567",
		"1.1.0-rc.1",
		"1.1.0",
		"1.10.0",
	}
	var pkgs []string
	for _, v := range order {
		pkgs = append(pkgs, pkgVersion(t, v))
	}
	if pkgs[7] != "1.1.0~rc.1" {
		t.Errorf("1.1.0-rc.1 as a package version is %q", pkgs[7])
	}
	dpkg := needTool(t, "dpkg", true)
	rpm := needTool(t, "rpm", true)
	for i := 1; i < len(pkgs); i++ {
		a, b := pkgs[i-1], pkgs[i]
		if err := exec.Command(dpkg, "--compare-versions", a, "lt", b).Run(); err != nil {
			t.Errorf("dpkg: %s is not older than %s", a, b)
		}
		out, err := exec.Command(rpm, "--eval", `%{lua: print(rpm.vercmp("`+a+`", "`+b+`"))}`).Output()
		if err != nil || strings.TrimSpace(string(out)) != "-1" {
			t.Errorf("rpm: vercmp(%s, %s) = %q %v, want -1", a, b, out, err)
		}
	}
	for _, bad := range []string{"dev", "abc1234", "1.0", "1.0.0 beta"} {
		if out, err := exec.Command("packages/version.sh", "--package", bad).CombinedOutput(); err == nil {
			t.Errorf("version.sh --package %q = %q, want a refusal", bad, out)
		}
	}
	// This checkout: a tag's X.Y.Z, or the last release and the time.
	out, err := exec.Command("packages/version.sh").Output()
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(out))
	if !regexp.MustCompile(`^\d+\.\d+\.\d+(\+git\d{14}\.[0-9a-f]{7}(\.dirty)?)?$`).MatchString(v) {
		t.Errorf("version.sh = %q", v)
	}
}

// TestReleaseScript runs deploy/release.sh for this machine's architecture
// only (ARCHES=…; the release itself builds amd64 and arm64, the same
// commands for each): a static binary that says its version, the .deb and
// the .rpm, and SHA256SUMS that checks them all.
func TestReleaseScript(t *testing.T) {
	needTool(t, "bash", true)
	sha := needTool(t, "sha256sum", true)
	out := t.TempDir()
	const version = "1.0.0+git20261202041500.abc1234"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "./release.sh")
	cmd.Env = append(os.Environ(), "OUT="+out, "ARCHES="+runtime.GOARCH, "VERSION="+version)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release.sh: %v\n%s", err, b)
	}
	entries, _ := os.ReadDir(out)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	bin := "hookonce-" + version + "-linux-" + runtime.GOARCH
	want := []string{"SHA256SUMS", bin, "hookonce-" + version + "-1." + rpmArch() + ".rpm", "hookonce_" + version + "-1_" + runtime.GOARCH + ".deb"}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("release.sh made %v, want %v", names, want)
	}
	sums := string(readFile(t, filepath.Join(out, "SHA256SUMS")))
	if n := strings.Count(sums, "\n"); n != 3 {
		t.Errorf("SHA256SUMS has %d lines:\n%s", n, sums)
	}
	check := exec.Command(sha, "--check", "SHA256SUMS")
	check.Dir = out
	if b, err := check.CombinedOutput(); err != nil {
		t.Errorf("sha256sum --check: %v\n%s", err, b)
	}
	if got := run(t, filepath.Join(out, bin), "version"); firstLine(got) != "hookonce "+version {
		t.Errorf("%s version = %q", bin, got)
	}
	if file, err := exec.LookPath("file"); err == nil {
		if got := run(t, file, filepath.Join(out, bin)); !strings.Contains(got, "statically linked") {
			t.Errorf("the binary is not static: %s", got)
		}
	}
	if dd, err := exec.LookPath("dpkg-deb"); err == nil {
		if got := strings.TrimSpace(run(t, dd, "-f", filepath.Join(out, want[3]), "Version")); got != version+"-1" {
			t.Errorf("the .deb's Version = %q", got)
		}
	}
}

// TestVersionDirtyOnUntrackedFiles: version.sh, run in a repository of its
// own, calls a tree clean only when git status shows nothing: a new file
// git does not ignore is a local change as an edited one is (it would be
// built into the binary); an ignored file is not.
func TestVersionDirtyOnUntrackedFiles(t *testing.T) {
	needTool(t, "bash", true)
	git := needTool(t, "git", true)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "deploy", "packages"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"deploy/packages/version.sh": readFile(t, "packages/version.sh"),
		"VERSION":                    []byte("1.2.3\n"),
		".gitignore":                 []byte("*.db\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gitEnv := append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	in := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, gitEnv
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, b)
		}
		return strings.TrimSpace(string(b))
	}
	in(git, "init", "-q")
	in(git, "add", ".")
	in(git, "commit", "-q", "-m", "release")
	in(git, "tag", "v1.2.3")
	version := func() string { t.Helper(); return in("deploy/packages/version.sh") }
	dirty := regexp.MustCompile(`^1\.2\.3\+git\d{14}\.[0-9a-f]{7}\.dirty$`)

	if v := version(); v != "1.2.3" {
		t.Fatalf("a clean checkout of v1.2.3: version.sh = %q", v)
	}
	if err := os.WriteFile(filepath.Join(dir, "store.db"), []byte("ignored"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != "1.2.3" {
		t.Errorf("with an ignored file only: version.sh = %q, want 1.2.3", v)
	}
	if err := os.WriteFile(filepath.Join(dir, "extra.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := version(); !dirty.MatchString(v) {
		t.Errorf("with an untracked file: version.sh = %q, want 1.2.3+git<time>.<commit>.dirty", v)
	}
	if err := os.Remove(filepath.Join(dir, "extra.go")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte("1.2.4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := version(); !dirty.MatchString(v) {
		t.Errorf("with an edited file: version.sh = %q, want 1.2.3+git<time>.<commit>.dirty", v)
	}
}
