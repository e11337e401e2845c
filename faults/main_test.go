package faults_test

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/hookonce/hookonce/internal/testkit/servetest"
	"github.com/hookonce/hookonce/internal/testkit/testenv"
)

// binary is `hookonce` built once for this test binary (CGO_ENABLED=0, the
// static build that ships), for the scenarios that kill -9 a real process.
var (
	binary   string
	buildErr error
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	// The scenarios mostly wait (leases, restarts, a 5s freeze): run them
	// side by side even on two cores, unless -parallel says otherwise.
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "8")
	}
	dir, err := os.MkdirTemp("", "hookonce-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary, buildErr = servetest.Build(dir, []string{"CGO_ENABLED=0"})
	code := pgtest.Main(m) // closes the shared PostgreSQL after the tests
	if code != 0 {
		return code
	}
	// Every store, proxy, fault proxy and subprocess a test started is
	// closed by then: a goroutine still running is a leak (a store's
	// background loop, a forward, a pipe). Idle keep-alive connections of
	// the default client are not.
	http.DefaultClient.CloseIdleConnections()
	if err := goleak.Find(); err != nil {
		fmt.Fprintf(os.Stderr, "goleak: goroutines outlived the fault tests:\n%v\n", err)
		return 1
	}
	return 0
}

// needBinary skips (or, under CI, fails) a test that runs `hookonce serve`
// when the build failed: package main may be mid-edit while this package
// is tested on its own; test.sh builds it first.
func needBinary(t *testing.T) {
	t.Helper()
	if buildErr == nil {
		return
	}
	testenv.Missing(t, fmt.Sprintf("hookonce does not build: %v", buildErr), "fix the build; test.sh builds it first")
}
