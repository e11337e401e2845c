package main

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/hookonce/hookonce/internal/testkit/testenv"
)

// TestDeployModeSmoke runs the deployment mode for one round of one
// second per path (the real mode: hookonce serve built from the checkout,
// wrk, nginx, PostgreSQL and pgbench, the site counting its executions)
// and checks that every path produced figures without an error and that
// every goal was judged. It measures nothing worth reading: the figures
// of a 1 s round on a shared machine are noise.
func TestDeployModeSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and builds hookonce: not with -short")
	}
	how := "Debian: apt-get install wrk nginx postgresql; .ci/run installs them"
	testenv.LookPath(t, how, "wrk")
	testenv.LookPath(t, how, "nginx")
	if _, err := pgtest.BinDir(); err != nil {
		testenv.Missing(t, "PostgreSQL server binaries: "+err.Error(), how)
	}
	goBin := testenv.LookPath(t, "the Go toolchain", "go")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "run", "-tags", "benchcompare", "./bench/compare",
		"-mode", "deploy", "-duration", "1s", "-rounds", "1", "-open-duration", "1s", "-out", t.TempDir())
	cmd.Dir = "../.." // buildHookonce builds the repository's root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("deploy mode: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	rows := map[string][]string{}
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "| "), " | ")
		rows[cells[0]] = append(rows[cells[0]], cells...)
	}
	for _, name := range []string{dName, dBare, dNginx, dPass, dDup, dNewPG, dNewSQ, dNewSQNormal, dNewSQDurable, dOpenMixSQ, dOpenMixNotify,
		"floor: hookonce's new-event statements, pgbench -M prepared -c 32 -j 2",
		"floor: hookonce's new-event statements, pgbench -M prepared -R 200"} {
		cells, ok := rows[name]
		if !ok {
			t.Errorf("no row %q in:\n%s", name, out)
			continue
		}
		if rps, err := strconv.ParseFloat(cells[1], 64); err != nil || rps <= 0 {
			t.Errorf("%s: req/s %q", name, cells[1])
		}
		if e := cells[len(cells)-1]; e != "0" {
			t.Errorf("%s: errors %s", name, e)
		}
	}
	for _, goal := range []string{"duplicates ≥ 1.15× nginx", "new events, PostgreSQL ≥ 1.1× the composite floor",
		"CPU per new event (PostgreSQL) ≤ 1.8×", "added p99 at 200 new events/s",
		"issue 46: with every notify channel down"} {
		found := false
		for name, cells := range rows {
			if strings.Contains(name, goal) {
				found = true
				if v := cells[len(cells)-1]; v != "met" && v != "NOT met" {
					t.Errorf("goal %q judged %q", goal, v)
				}
			}
		}
		if !found {
			t.Errorf("goal %q not judged in:\n%s", goal, out)
		}
	}
}
