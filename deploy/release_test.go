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
// the .rpm, SHA256SUMS that checks them all, and SHA256SUMS.sig, signed
// with a throwaway key, that the README's verify command accepts and that
// refuses a SHA256SUMS changed after signing. Without a key, or with one
// the signers file does not list, release.sh refuses before it builds.
func TestReleaseScript(t *testing.T) {
	needTool(t, "bash", true)
	sha := needTool(t, "sha256sum", true)
	keygen := needTool(t, "ssh-keygen", true)
	keys := t.TempDir()
	newKey := func(name string) (key, pub string) {
		key = filepath.Join(keys, name)
		run(t, keygen, "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", key)
		return key, strings.TrimSpace(string(readFile(t, key+".pub")))
	}
	key, pub := newKey("release")
	stranger, _ := newKey("stranger")
	// The format deploy/release.allowed_signers documents, for this key.
	f := strings.Fields(pub)
	signers := filepath.Join(keys, "allowed_signers")
	if err := os.WriteFile(signers, []byte("# test\nrelease@hookonce namespaces=\"file\" "+f[0]+" "+f[1]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	const version = "1.0.0+git20261202041500.abc1234"
	release := func(out string, env ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "./release.sh")
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "HOOKONCE_") }),
			append([]string{"OUT=" + out, "ARCHES=" + runtime.GOARCH, "VERSION=" + version}, env...)...)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	for _, c := range []struct {
		name, want string
		env        []string
	}{
		{"NoKey", "HOOKONCE_RELEASE_KEY is not set", nil},
		{"UnsignedNotOne", "HOOKONCE_RELEASE_KEY is not set", []string{"HOOKONCE_UNSIGNED=yes"}},
		{"KeyNotListed", "is not in", []string{"HOOKONCE_RELEASE_KEY=" + stranger, "HOOKONCE_RELEASE_SIGNERS=" + signers}},
		// The repository's own file lists no throwaway key.
		{"KeyNotInTheRepositorysSigners", "release.allowed_signers", []string{"HOOKONCE_RELEASE_KEY=" + key}},
	} {
		t.Run("Refuses"+c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "rel")
			b, err := release(out, c.env...)
			if err == nil || !strings.Contains(b, c.want) {
				t.Errorf("release.sh: %v, want a refusal saying %q:\n%s", err, c.want, b)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("release.sh refused but made %s", out)
			}
		})
	}

	out := t.TempDir()
	if b, err := release(out, "HOOKONCE_RELEASE_KEY="+key, "HOOKONCE_RELEASE_SIGNERS="+signers); err != nil {
		t.Fatalf("release.sh: %v\n%s", err, b)
	}
	entries, _ := os.ReadDir(out)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	bin := "hookonce-" + version + "-linux-" + runtime.GOARCH
	deb := "hookonce_" + version + "-1_" + runtime.GOARCH + ".deb"
	want := []string{"SHA256SUMS", "SHA256SUMS.sig", bin, "hookonce-" + version + "-1." + rpmArch() + ".rpm", deb}
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

	// The README's install steps, as a user pastes them beside the
	// downloads with the signers file fetched from the repository.
	verify, sumCheck := readmeInstallCommands(t)
	userDir := func(sums string) string {
		d := t.TempDir()
		for name, data := range map[string][]byte{
			"SHA256SUMS":              []byte(sums),
			"SHA256SUMS.sig":          readFile(t, filepath.Join(out, "SHA256SUMS.sig")),
			"release.allowed_signers": readFile(t, signers),
			deb:                       readFile(t, filepath.Join(out, deb)),
		} {
			if err := os.WriteFile(filepath.Join(d, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	sh := func(dir, line string) (string, error) {
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", line)
		cmd.Dir = dir
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	good := userDir(sums)
	if b, err := sh(good, verify); err != nil || !strings.Contains(b, `Good "file" signature for release@hookonce`) {
		t.Errorf("the README's %q on the release: %v\n%s", verify, err, b)
	}
	if b, err := sh(good, sumCheck); err != nil {
		t.Errorf("the README's %q on the release: %v\n%s", sumCheck, err, b)
	}
	// A SHA256SUMS changed after signing (one hash replaced, as an attacker
	// who swapped a package would) fails the signature check.
	line, _, _ := strings.Cut(sums, "\n")
	forged := strings.Replace(sums, line, strings.Repeat("0", 64)+line[64:], 1)
	if forged == sums {
		t.Fatal("the forged SHA256SUMS is the same")
	}
	if b, err := sh(userDir(forged), verify); err == nil {
		t.Errorf("the README's %q accepted a SHA256SUMS changed after signing:\n%s", verify, b)
	}
	// So does a good SHA256SUMS signed by a key the signers file lacks.
	strangerDir := userDir(sums)
	// (ssh-keygen -Y sign leaves an existing .sig and exits 0.)
	if err := os.Remove(filepath.Join(strangerDir, "SHA256SUMS.sig")); err != nil {
		t.Fatal(err)
	}
	run(t, keygen, "-q", "-Y", "sign", "-f", stranger, "-n", "file", filepath.Join(strangerDir, "SHA256SUMS"))
	if b, err := sh(strangerDir, verify); err == nil {
		t.Errorf("the README's %q accepted a signature by another key:\n%s", verify, b)
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
		if got := strings.TrimSpace(run(t, dd, "-f", filepath.Join(out, deb), "Version")); got != version+"-1" {
			t.Errorf("the .deb's Version = %q", got)
		}
	}
}

// readmeInstallCommands returns the signature check and the checksum
// check of the README's install steps, in the order a user runs them.
func readmeInstallCommands(t *testing.T) (verify, sumCheck string) {
	t.Helper()
	readme := string(readFile(t, "../README.md"))
	_, install, _ := strings.Cut(readme, "\n## Install\n")
	install, _, _ = strings.Cut(install, "\n## ")
	for _, line := range strings.Split(install, "\n") {
		switch {
		case strings.HasPrefix(line, "ssh-keygen -Y verify "):
			verify = line
		case strings.HasPrefix(line, "sha256sum --check "):
			sumCheck = line
		}
	}
	if verify == "" || sumCheck == "" || strings.Index(install, verify) > strings.Index(install, sumCheck) {
		t.Fatalf("the README's install section shows no ssh-keygen -Y verify before sha256sum --check:\n%s", install)
	}
	return verify, sumCheck
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
