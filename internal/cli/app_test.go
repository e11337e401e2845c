package cli

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// docs/configuration.md: every flag also reads an env var HOOKONCE_<FLAG>.
func TestEveryFlagHasItsEnvVar(t *testing.T) {
	for _, cmd := range newApp("dev", io.Discard, io.Discard).Commands {
		for _, f := range cmd.Flags {
			name := f.Names()[0]
			want := "HOOKONCE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
			ev, ok := f.(interface{ GetEnvVars() []string })
			if !ok {
				t.Errorf("%s --%s: flag type %T has no env vars", cmd.Name, name, f)
				continue
			}
			found := false
			for _, e := range ev.GetEnvVars() {
				found = found || e == want
			}
			if !found {
				t.Errorf("%s --%s: reads %v, want %s", cmd.Name, name, ev.GetEnvVars(), want)
			}
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("stdout is gone") }

// Exit codes come from one place: a command's own code, runtime 1 for an
// error a command returns bare (it exited 2 before), usage 2 for what fails
// before any command runs.
func TestExitCodes(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "h.db")
	runApp := func(stdout io.Writer, args ...string) (int, string) {
		var stderr strings.Builder
		code := run(newApp("dev", stdout, &stderr), append([]string{"hookonce"}, args...), &stderr)
		return code, stderr.String()
	}
	if code, errOut := runApp(io.Discard, "purge", "--store", db); code != exitOK {
		t.Fatalf("purge on a new store: exit %d: %s", code, errOut)
	}
	if code, errOut := runApp(failingWriter{}, "list", "--json", "--store", db); code != exitRuntime || !strings.Contains(errOut, "stdout is gone") {
		t.Errorf("list --json to a failing stdout: exit %d %q, want %d", code, errOut, exitRuntime)
	}
	if code, errOut := runApp(io.Discard, "lookup", "--store", db, "shop", "nope"); code != exitNotFound {
		t.Errorf("lookup of a missing record: exit %d %q, want %d", code, errOut, exitNotFound)
	}
	if code, errOut := runApp(io.Discard, "list", "--nope"); code != exitUsage {
		t.Errorf("unknown flag: exit %d %q, want %d", code, errOut, exitUsage)
	}
	t.Setenv("HOOKONCE_LIMIT", "many")
	if code, errOut := runApp(io.Discard, "list", "--store", db); code != exitUsage || !strings.Contains(errOut, "many") {
		t.Errorf("an env var that does not parse: exit %d %q, want %d", code, errOut, exitUsage)
	}
}
