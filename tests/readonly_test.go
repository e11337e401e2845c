package tests

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/view"
	"github.com/hookonce/hookonce/internal/testkit/servetest"
	"github.com/hookonce/hookonce/internal/testkit/unprivileged"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// invocation runs the hookonce binary bin as a user (nil: this one), with
// an optional limit on the size of files it writes.
type invocation struct {
	bin     string
	cred    *syscall.Credential
	noWrite bool // RLIMIT_FSIZE 0: every write to a file fails, as on a full disk
}

func (iv invocation) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(iv.bin, args...)
	if iv.noWrite {
		// ulimit -f 0 before exec: the limit holds for hookonce only.
		cmd = exec.Command("/bin/sh", append([]string{"-c", `ulimit -f 0 && exec "$0" "$@"`, iv.bin}, args...)...)
	}
	unprivileged.As(cmd, iv.cred)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run hookonce %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// seedStore leaves two done records of sender shop and one conflict in
// the store s.
func seedStore(t *testing.T, s dedupe.Store) {
	t.Helper()
	ctx := context.Background()
	for _, key := range []string{"ord-1", "ord-2"} {
		o := "owner-" + key
		if _, err := s.Claim(ctx, dedupe.ClaimRequest{Sender: "shop", Key: key, PayloadHash: "h-" + key, Owner: o,
			Lease: time.Minute, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, "shop", key, o, dedupe.Response{Status: 200, Body: []byte("OK " + key)}, dedupe.Attempt{At: time.Now(), By: dedupe.AttemptBySender, Outcome: "complete"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordConflict(ctx, dedupe.Conflict{Sender: "shop", Key: "ord-1", StoredHash: "h-ord-1",
		ReceivedHash: "h-other", ReceivedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
}

// readAll runs list, lookup and conflicts on dsn and checks that each shows
// what seedStore stored.
func readAll(t *testing.T, iv invocation, dsn string) {
	t.Helper()
	out, errOut, code := iv.run(t, "list", "--json", "--store", dsn)
	var recs []view.RecordJSON
	if code != 0 || json.Unmarshal([]byte(out), &recs) != nil || len(recs) != 2 {
		t.Fatalf("list: exit %d, stderr %q, stdout %s", code, errOut, out)
	}
	out, errOut, code = iv.run(t, "lookup", "--json", "--store", dsn, "shop", "ord-2")
	var rec view.RecordJSON
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec.Response == nil || rec.Response.BodyText == nil ||
		*rec.Response.BodyText != "OK ord-2" {
		t.Fatalf("lookup: exit %d, stderr %q, stdout %s", code, errOut, out)
	}
	out, errOut, code = iv.run(t, "conflicts", "--json", "--store", dsn)
	var cs []view.ConflictJSON
	if code != 0 || json.Unmarshal([]byte(out), &cs) != nil || len(cs) != 1 {
		t.Fatalf("conflicts: exit %d, stderr %q, stdout %s", code, errOut, out)
	}
}

var readCommands = [][]string{{"list"}, {"lookup", "shop", "ord-1"}, {"conflicts"}}

// A read-only command on a store file that does not exist fails, says so,
// and creates nothing; the commands that set a store up still create and
// migrate it.
func TestReadOnlyCommandsCreateNothing(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	for _, cmd := range readCommands {
		t.Run(cmd[0], func(t *testing.T) {
			args := append([]string{cmd[0], "--store", "sqlite:" + missing}, cmd[1:]...)
			out, errOut, code := hookonce(t, args...)
			if code != 1 || !strings.Contains(errOut, missing) || !strings.Contains(errOut, "does not exist") {
				t.Fatalf("exit %d, stderr %q, stdout %q; want 1 saying %s does not exist", code, errOut, out, missing)
			}
			if got := dirNames(t, dir); len(got) != 0 {
				t.Fatalf("%s created %v", cmd[0], got)
			}
		})
	}

	t.Run("migrate creates the store", func(t *testing.T) {
		dsn := "sqlite:" + filepath.Join(dir, "migrated.db")
		if _, errOut, code := hookonce(t, "migrate", "--store", dsn); code != 0 {
			t.Fatalf("migrate: exit %d: %s", code, errOut)
		}
		if out, errOut, code := hookonce(t, "list", "--json", "--store", dsn); code != 0 || strings.TrimSpace(out) != "[]" {
			t.Fatalf("list after migrate: exit %d %q %q", code, out, errOut)
		}
	})

	t.Run("serve creates and migrates the store", func(t *testing.T) {
		path := filepath.Join(dir, "served.db")
		s := startServe(t, "--upstream", proxytest.NewSite(t, nil).URL, "--store", "sqlite:"+path)
		if out, errOut, code := hookonce(t, "list", "--json", "--store", "sqlite:"+path); code != 0 || strings.TrimSpace(out) != "[]" {
			t.Fatalf("list beside serve: exit %d %q %q", code, out, errOut)
		}
		s.Terminate(t)
	})
}

// list, lookup and conflicts read a store that they may not write: a
// read-only file in a read-only directory, as a user who owns neither
// (nobody, when the tests run as root), whether the store was closed (no
// -wal, and none can be created) or serve has it open; and they create
// nothing there.
func TestReadOnlyCommandsOnAReadOnlyStore(t *testing.T) {
	cred := unprivileged.Credential(t)
	iv := invocation{bin: unprivileged.Runnable(t, cred, binary), cred: cred}
	for _, open := range []bool{false, true} {
		name := map[bool]string{false: "closed store", true: "beside an open writer"}[open]
		t.Run(name, func(t *testing.T) {
			dir := unprivileged.Dir(t, nil)
			path := filepath.Join(dir, "h.db")
			s := servetest.OpenStore(t, "sqlite:"+path)
			seedStore(t, s)
			if !open {
				s.Close()
			}
			if err := os.Chmod(path, 0o444); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o755) })
			before := dirNames(t, dir)

			readAll(t, iv, "sqlite:"+path)
			if got := dirNames(t, dir); !slices.Equal(got, before) {
				t.Fatalf("as %s the read-only commands turned %v into %v", unprivileged.String(cred), before, got)
			}
			// The same user cannot write there: the test means something.
			if _, _, code := iv.run(t, "release", "--store", "sqlite:"+path, "shop", "ord-1"); code == 0 {
				t.Fatalf("as %s release succeeded on the read-only store", unprivileged.String(cred))
			}
		})
	}
}

// On a full disk (no write to any file succeeds) list, lookup and
// conflicts still read, beside serve or not; release, which writes, fails
// under the same limit.
func TestReadOnlyCommandsOnAFullDisk(t *testing.T) {
	iv := invocation{bin: binary, noWrite: true}
	for _, open := range []bool{false, true} {
		name := map[bool]string{false: "closed store", true: "beside an open writer"}[open]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "h.db")
			s := servetest.OpenStore(t, "sqlite:"+path)
			seedStore(t, s)
			if !open {
				s.Close()
			}
			before := dirNames(t, dir)
			readAll(t, iv, "sqlite:"+path)
			if got := dirNames(t, dir); !slices.Equal(got, before) {
				t.Fatalf("the read-only commands turned %v into %v", before, got)
			}
			if _, errOut, code := iv.run(t, "release", "--store", "sqlite:"+path, "shop", "ord-1"); code != 1 {
				t.Fatalf("release with no room to write: exit %d %q, want 1", code, errOut)
			}
		})
	}
}
