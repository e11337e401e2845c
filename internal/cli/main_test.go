package cli

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/internal/testkit/servetest"
)

// The end-to-end tests of this package run the command line in-process:
// hookonce runs one command through the app as the binary would, and
// startServe runs `hookonce serve` (flags, env, Validate, Main) on
// 127.0.0.1:0 through servetest until the test stops it. Signals, exit
// statuses and the built binary are tested in tests/.

// hookonce runs a one-shot command and returns stdout, stderr, exit code.
func hookonce(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr strings.Builder
	code := run(newApp("dev", &stdout, &stderr), append([]string{"hookonce"}, args...), &stderr)
	return stdout.String(), stderr.String(), code
}

// inProcess runs the command line in this process, as the binary would
// (its log to stderr), until ctx is done.
func inProcess(ctx context.Context, args []string, stderr io.Writer) int {
	return exitCode(newApp("dev", os.Stdout, stderr).RunContext(ctx, append([]string{"hookonce"}, args...)))
}

// startServe runs `hookonce serve` in-process with args after serve's
// listeners and JSON log, and waits until it serves.
func startServe(t *testing.T, args ...string) *servetest.Server {
	t.Helper()
	return servetest.Start(t, servetest.Options{Run: inProcess, Args: args})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

const e2eConfig = `
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { body: id } ]
`
