package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// documentedReadiness is every readiness command line README.md and
// docs/operations.md show an operator ("$ hookonce readiness …" in a
// block, or `hookonce readiness …` in a sentence), as arguments.
func documentedReadiness(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	for _, f := range []string{"README.md", "docs/operations.md"} {
		data, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, line := range strings.Split(string(data), "\n") {
			var cmd string
			switch {
			case strings.HasPrefix(line, "$ hookonce readiness"):
				cmd, _, _ = strings.Cut(strings.TrimPrefix(line, "$ "), "#")
			case strings.Contains(line, "`hookonce readiness"):
				_, rest, _ := strings.Cut(line, "`hookonce readiness")
				rest, _, _ = strings.Cut(rest, "`")
				if strings.ContainsAny(rest, "[]") {
					continue // a synopsis, not a command line
				}
				cmd = "hookonce readiness" + rest
			default:
				continue
			}
			found = true
			out = append(out, strings.Fields(cmd)[1:])
		}
		if !found {
			t.Fatalf("%s shows no readiness command line", f)
		}
	}
	return out
}

// hookonce readiness as the README and the docs show it, on an installed
// host: it finds the host's config, the environment file with the
// sender's secret (which only that file holds) and the host's store, as
// check and list do. It once answered a usage error without --config,
// and "HOST_TEST_SECRET is not set" with it.
func TestReadinessAsDocumentedOnAnInstalledHost(t *testing.T) {
	cmds := documentedReadiness(t)
	h := fakeHost(t, hostConfigYAML, "HOST_TEST_SECRET="+hostSecret+"\n")
	if out, errOut, code := hookonce(t, "migrate"); code != exitOK {
		t.Fatalf("migrate: exit %d %s %s", code, out, errOut)
	}
	for _, args := range cmds {
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "/etc/hookonce/hookonce.yaml", h.Config)
		}
		out, errOut, code := hookonce(t, args...)
		// The sender has seen no traffic yet: exit 5, not enough traffic.
		if code != exitNotEnough || !strings.Contains(out, "shop: NOT ENOUGH TRAFFIC") {
			t.Errorf("hookonce %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, exitNotEnough, out, errOut)
		}
	}
	// Without a config anywhere, it names where it looked.
	fakeHost(t, "", "")
	if _, errOut, code := hookonce(t, "readiness"); code != exitUsage || !strings.Contains(errOut, "no config file") {
		t.Errorf("readiness without a config: exit %d %s", code, errOut)
	}
}
