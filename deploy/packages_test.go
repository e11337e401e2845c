package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/testenv"
	"go.yaml.in/yaml/v3"
)

// The packages (deploy/packages/): build.sh runs nfpm (pinned, through go
// run) on nfpm.yaml. The tests build both packages, read them with the
// distributions' own tools, and install the .deb on this machine when it
// may (root, dpkg): CI runs as root on a fresh Debian.

// packaged is what the packages put where, with mode and owner: the one
// list the .deb, the .rpm and the installed files are compared with.
var packaged = map[string]string{
	"/usr/bin/hookonce":                             "-rwxr-xr-x root root",
	"/usr/lib/systemd/system/hookonce.service":      "-rw-r--r-- root root",
	"/etc/hookonce":                                 "drwxr-xr-x root root",
	"/etc/hookonce/hookonce.yaml":                   "-rw-r----- root hookonce",
	"/var/lib/hookonce":                             "drwxr-x--- hookonce hookonce",
	"/usr/share/doc/hookonce/hookonce.example.yaml": "-rw-r--r-- root root",
	"/etc/hookonce/env":                             "-rw-r----- root hookonce",
	"/usr/share/doc/hookonce/copyright":             "-rw-r--r-- root root",
	"/usr/share/hookonce/prometheus/alerts.yml":     "-rw-r--r-- root root",
	"/usr/share/hookonce/grafana/hookonce.json":     "-rw-r--r-- root root",
}

const (
	packagedConfig = "/etc/hookonce/hookonce.yaml"
	packagedEnv    = "/etc/hookonce/env"
	// adminToken is made by the install (postinstall.sh), not shipped.
	adminToken     = "/etc/hookonce/admin-token"
	adminTokenMode = "-rw-r----- root hookonce"
)

// tokenFormat is what postinstall.sh writes: 32 random bytes as hex.
var tokenFormat = regexp.MustCompile(`^[0-9a-f]{64}\n$`)

// shippedCopies are the installed files that are repository files as they
// are (read at build time, never forked).
var shippedCopies = map[string]string{
	"/usr/share/hookonce/prometheus/alerts.yml":     "prometheus/alerts.yml",
	"/usr/share/hookonce/grafana/hookonce.json":     "grafana/hookonce.json",
	"/usr/share/doc/hookonce/hookonce.example.yaml": "../hookonce.example.yaml",
	packagedConfig: "../hookonce.example.yaml",
	packagedEnv:    "packages/env",
}

// The documentation and the web server files it names ship as the
// repository has them (nfpm.yaml globs them): each is packaged, mode 0644,
// and installed unchanged.
func init() {
	for dir, glob := range map[string]string{
		"/usr/share/doc/hookonce":        "../README.md",
		"/usr/share/doc/hookonce/docs":   "../docs/*.md",
		"/usr/share/doc/hookonce/nginx":  "nginx/*.conf",
		"/usr/share/doc/hookonce/apache": "apache/*.conf",
	} {
		files, err := filepath.Glob(glob)
		if err != nil || len(files) == 0 {
			panic(fmt.Sprintf("packages_test: no %s (%v)", glob, err))
		}
		for _, f := range files {
			dst := dir + "/" + filepath.Base(f)
			packaged[dst] = "-rw-r--r-- root root"
			shippedCopies[dst] = f
		}
	}
}

type builtPackages struct{ deb, rpm string }

// buildPackages runs build.sh with VERSION=version into a temporary
// directory and returns the two packages it made.
func buildPackages(t *testing.T, version string) builtPackages {
	t.Helper()
	needTool(t, "bash", true)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "packages/build.sh")
	cmd.Env = append(os.Environ(), "OUT="+out, "VERSION="+version, "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v\n%s", err, b)
	}
	var p builtPackages
	for _, g := range []struct {
		dst  *string
		glob string
	}{{&p.deb, "hookonce_*_" + runtime.GOARCH + ".deb"}, {&p.rpm, "hookonce-*." + rpmArch() + ".rpm"}} {
		m, _ := filepath.Glob(filepath.Join(out, g.glob))
		if len(m) != 1 {
			t.Fatalf("build.sh made %v for %s", m, g.glob)
		}
		*g.dst = m[0]
	}
	return p
}

// rpmArch is rpm's name for this machine's GOARCH (the deb's is GOARCH's).
func rpmArch() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return runtime.GOARCH
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	b, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, b)
	}
	return string(b)
}

// script returns one of deploy/packages/scripts as the packages carry it.
func script(t *testing.T, name string) string {
	return strings.TrimSpace(string(readFile(t, "packages/scripts/"+name+".sh")))
}

func TestPackages(t *testing.T) {
	p := buildPackages(t, "1.0.0")

	t.Run("Deb", func(t *testing.T) {
		dd := needTool(t, "dpkg-deb", true)
		if got := strings.TrimSpace(run(t, dd, "-f", p.deb, "Version")); got != "1.0.0-1" {
			t.Errorf("Version = %q", got)
		}
		// dpkg-deb -c: "-rw-r----- root/hookonce 1776 2026-… ./etc/hookonce/hookonce.yaml"
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(run(t, dd, "-c", p.deb)), "\n") {
			f := strings.Fields(line)
			path := strings.TrimSuffix(strings.TrimPrefix(f[len(f)-1], "."), "/")
			if _, ok := packaged[path]; ok || !strings.HasPrefix(f[0], "d") {
				got[path] = f[0] + " " + strings.Replace(f[1], "/", " ", 1)
			}
		}
		if !maps.Equal(got, packaged) {
			t.Errorf("the .deb holds\n%v\nwant\n%v", got, packaged)
		}
		c := strings.Fields(run(t, dd, "--info", p.deb, "conffiles"))
		if slices.Sort(c); !slices.Equal(c, []string{packagedEnv, packagedConfig}) {
			t.Errorf("conffiles = %q, want %s and %s", c, packagedConfig, packagedEnv)
		}
		for deb, ours := range map[string]string{"preinst": "preinstall", "postinst": "postinstall", "prerm": "preremove", "postrm": "postremove"} {
			if got := strings.TrimSpace(run(t, dd, "--info", p.deb, deb)); got != script(t, ours) {
				t.Errorf("%s is not scripts/%s.sh:\n%s", deb, ours, got)
			}
		}
	})

	t.Run("Rpm", func(t *testing.T) {
		rpm := needTool(t, "rpm", true)
		if got := run(t, rpm, "-qp", "--qf", "%{NAME} %{VERSION}-%{RELEASE} %{ARCH} %{LICENSE}", p.rpm); got != "hookonce 1.0.0-1 "+rpmArch()+" Apache-2.0" {
			t.Errorf("rpm says %q", got)
		}
		list := strings.Fields(run(t, rpm, "-qpl", p.rpm))
		if want := slices.Sorted(maps.Keys(packaged)); !slices.Equal(list, want) {
			t.Errorf("rpm -qpl:\n%v\nwant\n%v", list, want)
		}
		got := map[string]string{}
		config := map[string]string{}
		qf := `[%{FILENAMES} %{FILEMODES:perms} %{FILEUSERNAME} %{FILEGROUPNAME} %{FILEFLAGS:fflags}\n]`
		for _, line := range strings.Split(strings.TrimSpace(run(t, rpm, "-qp", "--qf", qf, p.rpm)), "\n") {
			f := strings.Fields(line)
			got[f[0]] = strings.Join(f[1:4], " ")
			if len(f) > 4 {
				config[f[0]] = f[4]
			}
		}
		if !maps.Equal(got, packaged) {
			t.Errorf("the .rpm holds\n%v\nwant\n%v", got, packaged)
		}
		// c: %config, n: noreplace — an upgrade never overwrites an edited file.
		if want := map[string]string{packagedConfig: "cn", packagedEnv: "cn"}; !maps.Equal(config, want) {
			t.Errorf("file flags %v, want %v", config, want)
		}
		scripts := run(t, rpm, "-qp", "--scripts", p.rpm)
		for _, s := range []struct{ rpm, ours string }{
			{"preinstall", "preinstall"}, {"postinstall", "postinstall"},
			{"preuninstall", "preremove"}, {"postuninstall", "postremove"},
		} {
			m := regexp.MustCompile(`(?s)` + s.rpm + ` scriptlet \(using /bin/sh\):\n(.*?)(?:\n\S+ scriptlet \(|$)`).FindStringSubmatch(scripts)
			if m == nil || strings.TrimSpace(m[1]) != script(t, s.ours) {
				t.Errorf("rpm %s is not scripts/%s.sh:\n%s", s.rpm, s.ours, scripts)
			}
		}
		for _, want := range []string{"useradd --system", "[ -d /run/systemd/system ]", "systemctl enable hookonce.service", "2) first=no", "remove | 0)",
			"/usr/bin/hookonce check --config /etc/hookonce/hookonce.yaml"} {
			if !strings.Contains(scripts, want) {
				t.Errorf("the rpm's scripts lack %q", want)
			}
		}
		// The only start is try-restart on an upgrade (a running service
		// stays running); the note's "systemctl start" is text, not a command.
		if m := regexp.MustCompile(`(?m)^\s*systemctl (start|restart|reload-or-restart) .*|--now`).FindAllString(scripts, -1); len(m) > 0 {
			t.Errorf("a script starts the service: %q", m)
		}
	})

	t.Run("InstallDeb", func(t *testing.T) { installDeb(t, p) })
}

// needRoot skips (fails under CI=true) unless the test runs as root.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "installing the .deb needs root", "CI runs as root")
	}
}

// installDeb installs the .deb on this machine, upgrades it, removes and
// purges it, checking at each step what dpkg and the scripts left behind.
func installDeb(t *testing.T, p builtPackages) {
	needRoot(t)
	dpkg := needTool(t, "dpkg", true)
	// Never touch a real installation.
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", "hookonce").Output(); err == nil && len(out) > 0 {
		t.Skipf("a hookonce package is on this machine (%s): not touching it", out)
	}
	for _, d := range []string{"/etc/hookonce", "/var/lib/hookonce", "/usr/bin/hookonce"} {
		if _, err := os.Lstat(d); err == nil {
			t.Skipf("%s exists on this machine: not touching it", d)
		}
	}
	_, userErr := user.Lookup("hookonce")
	hadUser := userErr == nil
	t.Cleanup(func() {
		// Purge whatever state a failure left, and the user if the test made it.
		_ = exec.Command(dpkg, "--purge", "hookonce").Run()
		if !hadUser {
			_ = exec.Command("userdel", "hookonce").Run()
			_ = exec.Command("groupdel", "hookonce").Run()
		}
	})

	out := run(t, dpkg, "-i", p.deb)
	if !strings.Contains(out, "edit /etc/hookonce/hookonce.yaml") || !strings.Contains(out, "systemctl start hookonce") {
		t.Errorf("dpkg -i printed no note on what to do next:\n%s", out)
	}
	// The postinst checked the config: the secrets are not in the env file yet.
	if !strings.Contains(out, "environment variable ROBOKASSA_PASSWORD2 is not set") {
		t.Errorf("dpkg -i did not say what the config lacks:\n%s", out)
	}
	if got := run(t, "/usr/bin/hookonce", "version"); firstLine(got) != "hookonce 1.0.0" {
		t.Errorf("hookonce version = %q", got)
	}
	for installed, repo := range shippedCopies {
		if !bytes.Equal(readFile(t, installed), readFile(t, repo)) {
			t.Errorf("%s is not the repository's deploy/%s", installed, repo)
		}
	}
	if c := string(readFile(t, "/usr/share/doc/hookonce/copyright")); !strings.HasPrefix(c, "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n") ||
		!strings.Contains(c, "\nLicense: Apache-2.0\n") {
		t.Error("/usr/share/doc/hookonce/copyright is not a machine-readable copyright file naming Apache-2.0")
	}

	// The operator's way in, as pasted: check finds the config, and the
	// secrets once they are in the env file.
	if out, code := operator(t, "check"); code != 2 || !strings.Contains(out, "ROBOKASSA_PASSWORD2 is not set") {
		t.Errorf("hookonce check before the secrets: exit %d\n%s", code, out)
	}
	const secrets = "ROBOKASSA_PASSWORD2=robo-secret-value\nTBANK_PASSWORD=tbank-secret-value\n"
	appendFile(t, packagedEnv, secrets)
	if out, code := operator(t, "check"); code != 0 || out != packagedConfig+": ok, 2 sender(s): robokassa, tbank\n" {
		t.Errorf("hookonce check with the secrets in %s: exit %d\n%s", packagedEnv, code, out)
	}
	if got := run(t, "/usr/bin/hookonce", "check", "--config", packagedConfig); strings.Contains(got, "secret-value") {
		t.Errorf("hookonce check printed a secret: %q", got)
	}
	if got, want := readFile(t, "/usr/lib/systemd/system/hookonce.service"), readFile(t, "packages/hookonce.service"); !bytes.Equal(got, want) {
		t.Error("the installed unit is not deploy/packages/hookonce.service")
	}

	u, err := user.Lookup("hookonce")
	if err != nil {
		t.Fatalf("no user hookonce after dpkg -i: %v", err)
	}
	pw := strings.Split(strings.TrimSpace(run(t, "getent", "passwd", "hookonce")), ":")
	if uid, _ := strconv.Atoi(u.Uid); uid == 0 || uid >= 1000 || pw[5] != "/var/lib/hookonce" || !strings.HasSuffix(pw[6], "nologin") {
		t.Errorf("getent passwd hookonce = %q: want a system user (uid 1–999), home /var/lib/hookonce, no login shell", pw)
	}
	if g, err := user.LookupGroupId(u.Gid); err != nil || g.Name != "hookonce" {
		t.Errorf("hookonce's primary group: %v %v", g, err)
	}
	checkInstalled(t, packaged)
	checkInstalled(t, map[string]string{adminToken: adminTokenMode})
	token := string(readFile(t, adminToken))
	if !tokenFormat.MatchString(token) {
		t.Errorf("%s holds %d bytes, want 64 hex digits and a newline", adminToken, len(token))
	}
	if !strings.Contains(out, adminToken) {
		t.Errorf("dpkg -i did not say where the admin token is:\n%s", out)
	}
	if strings.Contains(out, strings.TrimSpace(token)) {
		t.Error("dpkg -i printed the admin token")
	}

	if _, err := os.Stat("/run/systemd/system"); err == nil {
		if got, _ := exec.Command("systemctl", "is-enabled", "hookonce").Output(); strings.TrimSpace(string(got)) != "enabled" {
			t.Errorf("systemctl is-enabled hookonce: %q", got)
		}
		if got, _ := exec.Command("systemctl", "is-active", "hookonce").Output(); strings.TrimSpace(string(got)) != "inactive" {
			t.Errorf("systemctl is-active hookonce: %q, want inactive (not started)", got)
		}
	} else if _, err := os.Lstat("/etc/systemd/system/multi-user.target.wants/hookonce.service"); err == nil {
		t.Error("enabled although systemd does not run")
	}

	// The operator puts the admin listener where this test can have it
	// (the packaged 127.0.0.1:8081 may be taken on a shared machine); the
	// commands find it in the env file, as they find the token in its file.
	adminAddr := freeLoopbackAddr(t)
	appendFile(t, packagedEnv, "HOOKONCE_ADMIN_LISTEN="+adminAddr+"\n")
	db := serveAsUnit(t, u, func() { adminNeedsToken(t, adminAddr, strings.TrimSpace(token)) })
	operatorCommands(t)

	// An upgrade keeps the edited config and the database.
	f, err := os.OpenFile(packagedConfig, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	const edit = "# edited by the operator\n"
	if _, err := f.WriteString(edit); err != nil {
		t.Fatal(err)
	}
	f.Close()
	p2 := buildPackages(t, "1.0.1")
	out = run(t, dpkg, "-i", p2.deb)
	if strings.Contains(out, "systemctl start hookonce") || strings.Contains(out, "now requires a token") {
		t.Errorf("the upgrade printed the first install's note or a new token's:\n%s", out)
	}
	if got := run(t, "/usr/bin/hookonce", "version"); firstLine(got) != "hookonce 1.0.1" {
		t.Errorf("after the upgrade hookonce version = %q", got)
	}
	keptAfter := func(step string) {
		t.Helper()
		if !strings.HasSuffix(string(readFile(t, packagedConfig)), edit) {
			t.Errorf("after %s the config lost the operator's edit", step)
		}
		if _, err := os.Stat(db); err != nil {
			t.Errorf("after %s the database is gone: %v", step, err)
		}
		if !strings.Contains(string(readFile(t, packagedEnv)), secrets) {
			t.Errorf("after %s the env file lost the operator's secrets", step)
		}
		// The token the install made is never made again.
		checkInstalled(t, map[string]string{adminToken: adminTokenMode})
		if got := string(readFile(t, adminToken)); got != token {
			t.Errorf("after %s %s holds another token", step, adminToken)
		}
		for _, suffix := range []string{".dpkg-new", ".dpkg-dist", ".dpkg-old"} {
			if _, err := os.Stat(packagedConfig + suffix); err == nil {
				t.Errorf("after %s dpkg left %s%s", step, packagedConfig, suffix)
			}
		}
	}
	keptAfter("the upgrade")
	checkInstalled(t, packaged)

	// An upgrade from a version that made no token makes one, and says so;
	// an env file that set HOOKONCE_ADMIN_TOKEN itself (serve would refuse
	// both) is named, and a running hookonce would not be restarted.
	if err := os.Remove(adminToken); err != nil {
		t.Fatal(err)
	}
	appendFile(t, packagedEnv, "HOOKONCE_ADMIN_TOKEN=the-operators-own\n")
	out = run(t, dpkg, "-i", p2.deb)
	if !strings.Contains(out, "now requires a token, made in "+adminToken) ||
		!strings.Contains(out, "sets HOOKONCE_ADMIN_TOKEN, and the service now reads its token from "+adminToken) ||
		!strings.Contains(out, "was not restarted") {
		t.Errorf("the upgrade to a token file over an env file with HOOKONCE_ADMIN_TOKEN said:\n%s", out)
	}
	if strings.Contains(out, "the-operators-own") {
		t.Error("the upgrade printed the env file's token")
	}
	checkInstalled(t, map[string]string{adminToken: adminTokenMode})
	token = string(readFile(t, adminToken))
	if !tokenFormat.MatchString(token) {
		t.Errorf("the upgrade made a token of %d bytes", len(token))
	}
	env := readFile(t, packagedEnv)
	if err := os.WriteFile(packagedEnv, bytes.Replace(env, []byte("HOOKONCE_ADMIN_TOKEN=the-operators-own\n"), nil, 1), 0o640); err != nil {
		t.Fatal(err)
	}

	// dpkg -r: the program goes, the config and the state stay.
	run(t, dpkg, "-r", "hookonce")
	for _, path := range []string{"/usr/bin/hookonce", "/usr/lib/systemd/system/hookonce.service", "/usr/share/doc/hookonce/hookonce.example.yaml"} {
		if _, err := os.Lstat(path); err == nil {
			t.Errorf("dpkg -r left %s", path)
		}
	}
	keptAfter("dpkg -r")
	checkInstalled(t, map[string]string{
		"/etc/hookonce/hookonce.yaml": packaged["/etc/hookonce/hookonce.yaml"],
		packagedEnv:                   packaged[packagedEnv],
		"/var/lib/hookonce":           packaged["/var/lib/hookonce"],
		adminToken:                    adminTokenMode,
	})
	if got := run(t, "dpkg-query", "-W", "-f", "${Status}", "hookonce"); got != "deinstall ok config-files" {
		t.Errorf("after dpkg -r: %q", got)
	}

	// dpkg -P: nothing of the package stays; the system user does (postremove.sh says why).
	run(t, dpkg, "-P", "hookonce")
	for _, path := range []string{"/etc/hookonce", "/var/lib/hookonce"} {
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("dpkg -P left %s (%v)", path, err)
		}
	}
	if out, err := exec.Command("dpkg-query", "-W", "hookonce").CombinedOutput(); err == nil {
		t.Errorf("dpkg still knows hookonce after the purge: %s", out)
	}
	if _, err := user.Lookup("hookonce"); err != nil {
		t.Errorf("the purge removed the user hookonce: %v", err)
	}
}

// checkInstalled compares paths' modes and owners ("-rw-r----- root hookonce").
func checkInstalled(t *testing.T, want map[string]string) {
	t.Helper()
	for path, w := range want {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		owner, group := strconv.Itoa(int(st.Uid)), strconv.Itoa(int(st.Gid))
		if u, err := user.LookupId(owner); err == nil {
			owner = u.Username
		}
		if g, err := user.LookupGroupId(group); err == nil {
			group = g.Name
		}
		if got := fmt.Sprintf("%s %s %s", fi.Mode().String(), owner, group); got != w {
			t.Errorf("%s is %s, want %s", path, got, w)
		}
	}
}

// serveAsUnit runs the installed unit's ExecStart with its Environment as
// the hookonce user (what systemd would do, without its sandbox), on
// loopback ports of its own, until it serves; then stops it with the
// unit's KillSignal, after running while. It returns the database file it
// made in the state directory: the service user can read its config, its
// admin token and write its state.
func serveAsUnit(t *testing.T, u *user.User, while func()) string {
	t.Helper()
	unit := unit(t, "/usr/lib/systemd/system/hookonce.service")
	if unit["Service.KillSignal"][0] != "SIGTERM" || unit["Service.User"][0] != "hookonce" {
		t.Fatalf("unit: KillSignal %v, User %v", unit["Service.KillSignal"], unit["Service.User"])
	}
	argv := strings.Fields(unit["Service.ExecStart"][0])
	env := []string{"PATH=/usr/bin:/bin"}
	env = append(env, unit["Service.Environment"]...)
	// EnvironmentFile=-/etc/hookonce/env: read by systemd (as root), after
	// Environment=, so its lines win.
	if ef := unit["Service.EnvironmentFile"]; len(ef) != 1 || ef[0] != "-"+packagedEnv {
		t.Fatalf("EnvironmentFile = %q, want -%s", ef, packagedEnv)
	}
	for _, line := range strings.Split(string(readFile(t, packagedEnv)), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			env = append(env, line)
		}
	}
	if ef := envValue(env, "HOOKONCE_ADMIN_TOKEN_FILE"); ef != adminToken {
		t.Errorf("the unit's HOOKONCE_ADMIN_TOKEN_FILE = %q, want %s", ef, adminToken)
	}
	env = append(env, "HOOKONCE_LISTEN=127.0.0.1:0")
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = unit["Service.WorkingDirectory"][0]
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log []string
	serving, adminAuth := false, false
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		log = append(log, sc.Text())
		if strings.Contains(sc.Text(), `"admin listener serving"`) {
			adminAuth = strings.Contains(sc.Text(), `"auth":true`)
		}
		if strings.Contains(sc.Text(), `"hookonce serving"`) {
			serving = true
			break
		}
	}
	if serving {
		if !adminAuth {
			t.Errorf("the admin listener serves without a token:\n%s", strings.Join(log, "\n"))
		}
		while()
	}
	drained := make(chan struct{})
	go func() {
		for sc.Scan() {
			log = append(log, sc.Text())
		}
		close(drained)
	}()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-drained // the pipe is read to its end before Wait closes it
	werr := cmd.Wait()
	if !serving || werr != nil {
		t.Fatalf("%s as hookonce: serving %v, exit %v\n%s", unit["Service.ExecStart"][0], serving, werr, strings.Join(log, "\n"))
	}
	db := strings.TrimPrefix(envValue(env, "HOOKONCE_STORE"), "sqlite:")
	if db == "" || filepath.Dir(db) != "/var/lib/hookonce" {
		t.Fatalf("HOOKONCE_STORE = %q, want a file in /var/lib/hookonce", envValue(env, "HOOKONCE_STORE"))
	}
	fi, err := os.Stat(db)
	if err != nil {
		t.Fatalf("serve made no database: %v", err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid {
		t.Errorf("%s belongs to uid %d, want hookonce (%d)", db, st.Uid, uid)
	}
	return db
}

// adminNeedsToken: the service's admin listener at addr refuses its API
// without the install's token, and the operator's commands, run as root
// with no flag, find the listener and the token and are served.
func adminNeedsToken(t *testing.T, addr, token string) {
	t.Helper()
	get := func(auth string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("the admin listener: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(""); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/events with no token: %d, want 401", code)
	}
	if code := get("Bearer not-" + token); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/events with another token: %d, want 401", code)
	}
	if code := get("Bearer " + token); code != http.StatusOK {
		t.Errorf("GET /v1/events with %s's token: %d, want 200", adminToken, code)
	}
	if out, code := operator(t, "redeliver", "--status", "unretried"); code != 0 || out != "no unretried events\n" {
		t.Errorf("hookonce redeliver --status unretried as root: exit %d\n%s", code, out)
	}
	if out, code := operator(t, "health", "--ready"); code != 0 {
		t.Errorf("hookonce health --ready as root: exit %d\n%s", code, out)
	}
}

// freeLoopbackAddr is a loopback address with a port nothing listens on.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// operator runs the installed hookonce as an operator would, pasting a
// command into a root shell that has none of hookonce's variables set; it
// returns the combined output and the exit code.
func operator(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("/usr/bin/hookonce", args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/root"}
	cmd.Dir = t.TempDir() // no ./hookonce.yaml there
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("hookonce %s: %v", strings.Join(args, " "), err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// alertCommand finds hookonce commands in the installed alerts' summaries
// and descriptions: `hookonce …` in backquotes, as an operator pastes them.
var alertCommand = regexp.MustCompile("`(hookonce [^`]+)`")

// operatorCommands runs, on the installed host with the store serve made,
// the read-only commands as pasted: hookonce list, and every list, lookup
// and conflicts command the installed alerts tell the operator to run,
// with a sender and key filled in. They find the store in
// /var/lib/hookonce by themselves: "no record" is an answer from it, "no
// such file" is not.
func operatorCommands(t *testing.T) {
	t.Helper()
	if out, code := operator(t, "list"); code != 0 || !strings.HasPrefix(out, "SENDER") {
		t.Errorf("hookonce list: exit %d\n%s", code, out)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(readFile(t, "/usr/share/hookonce/prometheus/alerts.yml"), &rules); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("{{ $labels.sender }}", "robokassa", "{{$labels.sender}}", "robokassa", " KEY", " 4711")
	ran := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, text := range []string{r.Annotations["summary"], r.Annotations["description"]} {
				for _, m := range alertCommand.FindAllStringSubmatch(text, -1) {
					args := strings.Fields(fill.Replace(m[1]))[1:]
					switch args[0] {
					case "list", "conflicts", "lookup":
					default:
						continue // writes, or needs the running service
					}
					out, code := operator(t, args...)
					if code != 0 && !(args[0] == "lookup" && code == 3 && strings.Contains(out, "no record")) {
						t.Errorf("alert %s says run %q: exit %d\n%s", r.Alert, m[1], code, out)
					}
					ran++
				}
			}
		}
	}
	if ran == 0 {
		t.Error("the installed alerts name no hookonce list, lookup or conflicts command")
	}
}

func envValue(env []string, key string) string {
	for _, e := range slices.Backward(env) {
		if k, v, ok := strings.Cut(e, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// TestPackagedUnit keeps the packaged unit the hand-installed one
// (deploy/systemd/hookonce.service, TestSystemdUnit) but for what a
// package changes: the binary's path and a static user the package makes.
func TestPackagedUnit(t *testing.T) {
	const path = "packages/hookonce.service"
	hand, pkg := unit(t, "systemd/hookonce.service"), unit(t, path)
	changed := map[string][]string{
		"Service.ExecStart":          {"/usr/bin/hookonce serve --config /etc/hookonce/hookonce.yaml"},
		"Service.DynamicUser":        nil,
		"Service.User":               {"hookonce"},
		"Service.Group":              {"hookonce"},
		"Service.StateDirectoryMode": {"0750"},
		// As the service user: it can read the env file (root:hookonce).
		"Service.ExecReload": {"/usr/bin/hookonce check --config /etc/hookonce/hookonce.yaml", "/bin/kill -HUP $MAINPID"},
	}
	// The packaged admin API takes the token the install made; the rest of
	// the environment is the hand-installed unit's.
	const tokenEnv = "HOOKONCE_ADMIN_TOKEN_FILE=" + adminToken
	if !slices.Contains(pkg["Service.Environment"], tokenEnv) {
		t.Errorf("Environment = %q lacks %s", pkg["Service.Environment"], tokenEnv)
	}
	pkg["Service.Environment"] = slices.DeleteFunc(slices.Clone(pkg["Service.Environment"]), func(e string) bool { return e == tokenEnv })
	for k := range maps.Keys(hand) {
		if _, ok := changed[k]; !ok && !slices.Equal(hand[k], pkg[k]) {
			t.Errorf("%s = %q, the hand-installed unit has %q", k, pkg[k], hand[k])
		}
	}
	for k, v := range pkg {
		if _, ok := hand[k]; !ok {
			if _, ok := changed[k]; !ok {
				t.Errorf("%s = %q is not in the hand-installed unit", k, v)
			}
		}
	}
	for k, v := range changed {
		if !slices.Equal(pkg[k], v) {
			t.Errorf("%s = %q, want %q", k, pkg[k], v)
		}
	}
	t.Run("SystemdAnalyzeVerify", func(t *testing.T) {
		systemdAnalyzeVerify(t, path, "/usr/bin/hookonce")
	})
}

// firstLine is what hookonce version says first, the version; a revision
// line follows when the build knows its commit.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
