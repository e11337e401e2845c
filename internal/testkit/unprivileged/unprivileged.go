// Package unprivileged lets tests of file permissions run as an ordinary
// user. Root ignores permission bits, so a test that makes a store file
// read-only proves nothing as root: when the tests run as root, the
// processes under test (or the test itself, see Rerun) run as "nobody".
//
// Without root nothing changes: the tests already run as an ordinary user.
// When the tests run as root and no unprivileged user exists, they skip
// (or fail under CI=true).
package unprivileged

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/testenv"
)

// Credential returns the user that permission tests run their processes
// as: nil when the tests do not run as root (use the current user), else
// "nobody".
func Credential(tb testing.TB) *syscall.Credential {
	tb.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		testenv.Missing(tb, fmt.Sprintf("running as root and no user nobody to run permission tests as: %v", err), "useradd nobody")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
}

// As makes cmd run as cred (nil: as the current user).
func As(cmd *exec.Cmd, cred *syscall.Credential) *exec.Cmd {
	if cred != nil {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Credential = cred
	}
	return cmd
}

// Dir returns a new empty directory that cred's user owns and can reach
// (its parent is made traversable), removed when the test ends.
func Dir(tb testing.TB, cred *syscall.Credential) string {
	tb.Helper()
	dir := tb.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	Own(tb, cred, dir)
	return dir
}

// Own gives paths to cred's user (nothing to do for nil).
func Own(tb testing.TB, cred *syscall.Credential, paths ...string) {
	tb.Helper()
	if cred == nil {
		return
	}
	for _, p := range paths {
		if err := os.Lchown(p, int(cred.Uid), int(cred.Gid)); err != nil {
			tb.Fatal(err)
		}
	}
}

// Runnable returns a copy of the binary at path that cred's user may run
// (the go tool builds test binaries in directories only their owner can
// enter). For a nil cred it returns path.
func Runnable(tb testing.TB, cred *syscall.Credential, path string) string {
	tb.Helper()
	if cred == nil {
		return path
	}
	dir := Dir(tb, nil)
	dst := filepath.Join(dir, filepath.Base(path))
	in, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
	return dst
}

// childEnv marks the process that Rerun started.
const childEnv = "HOOKONCE_UNPRIVILEGED_RERUN"

// Rerun runs the calling top-level test again as an unprivileged user when
// the tests run as root, passes its output on, fails t if it fails, and
// returns true: the caller then returns. It returns false (and the test
// goes on in this process) when the tests do not run as root.
//
//	func TestX(t *testing.T) {
//		if unprivileged.Rerun(t) {
//			return
//		}
//		…
func Rerun(t *testing.T) bool {
	t.Helper()
	cred := Credential(t)
	if cred == nil {
		return false
	}
	if os.Getenv(childEnv) != "" {
		t.Fatal("unprivileged.Rerun: the rerun still runs as root")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := Runnable(t, cred, self)
	tmp := Dir(t, cred) // the child's TMPDIR: t.TempDir() there is its own
	timeout := 5 * time.Minute
	if dl, ok := t.Deadline(); ok {
		timeout = time.Until(dl) - 5*time.Second
	}
	cmd := As(exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1",
		"-test.timeout="+timeout.String()), cred)
	cmd.Env = append(os.Environ(), childEnv+"=1", "TMPDIR="+tmp, "HOME="+tmp)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		t.Fatalf("%s as uid %d failed (%v):\n%s", t.Name(), cred.Uid, err, out)
	case err != nil:
		t.Fatalf("rerun %s as uid %d: %v", t.Name(), cred.Uid, err)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+t.Name()+" ")) && !bytes.Contains(out, []byte("--- SKIP: "+t.Name()+" ")) {
		t.Fatalf("rerun of %s as uid %d ran no such test:\n%s", t.Name(), cred.Uid, out)
	}
	t.Logf("ran as uid %d:\n%s", cred.Uid, out)
	return true
}

// String describes who the tests run their processes as, for messages.
func String(cred *syscall.Credential) string {
	if cred == nil {
		return fmt.Sprintf("uid %d", os.Getuid())
	}
	return fmt.Sprintf("uid %d", cred.Uid)
}
