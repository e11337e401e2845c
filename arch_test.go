package main_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/hookonce/hookonce"

// The import rules of ARCHITECTURE.md, checked rather than hoped for:
// each package's code (go list -deps) and, with the allowances the doc
// gives tests, its tests (go list -deps -test).
func TestImportRules(t *testing.T) {
	rules := map[string][]string{ // package → what it must never import
		"contract":         {"dedupe", "proxy", "admin", "probe", "dedupe/sqlite", "dedupe/postgres", "dedupe/redis"},
		"dedupe":           {"contract", "proxy", "admin", "dedupe/sqlite", "dedupe/postgres", "dedupe/redis"},
		"dedupe/sqlite":    {"contract", "proxy", "admin", "probe", "dedupe/postgres", "dedupe/redis"},
		"dedupe/postgres":  {"contract", "proxy", "admin", "probe", "dedupe/sqlite", "dedupe/redis"},
		"dedupe/redis":     {"contract", "proxy", "admin", "probe", "dedupe/sqlite", "dedupe/postgres"},
		"dedupe/cache":     {"contract", "proxy", "admin", "probe", "dedupe/sqlite", "dedupe/postgres", "dedupe/redis"},
		"dedupe/readiness": {"contract", "proxy", "admin", "probe", "dedupe/sqlite", "dedupe/postgres", "dedupe/redis"},
		"dedupe/retention": {"contract", "proxy", "admin", "probe", "dedupe/sqlite", "dedupe/postgres", "dedupe/redis", "dedupe/cache", "dedupe/readiness"},
		"dedupe/view":      {"contract", "proxy", "admin", "probe", "dedupe/sqlite", "dedupe/postgres", "dedupe/redis", "dedupe/cache", "dedupe/readiness"},
		"proxy":            {"admin", "probe", "dedupe/sqlite", "dedupe/postgres", "dedupe/redis"},
		"admin":            {"proxy", "proxy/proxytest", "probe", "dedupe/sqlite", "dedupe/postgres", "dedupe/redis"},
		"probe":            {"proxy", "proxy/proxytest", "admin", "dedupe", "contract", "dedupe/sqlite", "dedupe/postgres", "dedupe/redis"},
		"notify":           {"contract", "dedupe", "proxy", "admin", "probe", "dedupe/readiness", "internal/problem", "dedupe/sqlite", "dedupe/postgres", "dedupe/redis"},
	}
	// "Tests may import more": the real request path (proxy/proxytest,
	// with proxy, contract and dedupe), the conformance suite and the
	// embedded store, the tests of admin and probe included; probe's tests
	// also run against a real admin API.
	testsMay := []string{"proxy", "proxy/proxytest", "contract", "dedupe", "dedupe/dedupetest", "dedupe/sqlite"}
	testsMayAlso := map[string][]string{"probe": {"admin"}}
	// A backend's tests never import another backend, nor the request
	// path: the proxy × store matrix lives in tests/stores.
	path := []string{"proxy", "proxy/proxytest", "contract"}
	testsMayNot := map[string][]string{
		"dedupe/sqlite":   path,
		"dedupe/postgres": append([]string{"dedupe/sqlite"}, path...),
		"dedupe/redis":    append([]string{"dedupe/sqlite"}, path...),
	}
	// notify imports nothing of hookonce's at all: serve maps its own
	// decisions to notify's events.
	for p := range deps(t, "./notify") {
		if strings.HasPrefix(p, mod+"/") && p != mod+"/notify" {
			t.Errorf("notify imports %s: it imports nothing of hookonce's", p)
		}
	}
	for pkg, banned := range rules {
		code := deps(t, "./"+pkg)
		for _, b := range append(banned, "internal/cli") {
			if code[mod+"/"+b] {
				t.Errorf("%s imports %s (directly or not): ARCHITECTURE.md forbids it", pkg, b)
			}
		}
		tests := deps(t, "-test", "./"+pkg)
		for _, b := range append(banned, "internal/cli") {
			if tests[mod+"/"+b] && !code[mod+"/"+b] && (!slices.Contains(testsMay, b) || slices.Contains(testsMayNot[pkg], b)) &&
				!slices.Contains(testsMayAlso[pkg], b) {
				t.Errorf("the tests of %s import %s (directly or not): ARCHITECTURE.md does not allow it", pkg, b)
			}
		}
	}
}

// internal/cli is imported only by package main (main.go), not by its
// tests either; only internal/cli knows every backend (and, for tests,
// internal/testkit/servetest, which opens the store a serve under test
// writes); the internal test helpers are imported by tests only.
func TestImportedOnlyBy(t *testing.T) {
	helpers := []string{"contract/internal/php/phptest"}
	kit, err := exec.Command("go", "list", "./internal/testkit/...").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(kit)) {
		helpers = append(helpers, strings.TrimPrefix(p, mod+"/"))
	}
	if !slices.Contains(helpers, "internal/testkit/servetest") {
		t.Fatal("internal/testkit/servetest, the one harness that runs hookonce serve, is not listed as a test helper")
	}
	if len(helpers) < 9 {
		t.Fatalf("internal/testkit holds %d packages, want the test servers and helpers", len(helpers)-1)
	}
	backends := []string{"dedupe/sqlite", "dedupe/postgres", "dedupe/redis"}
	code, tests := importers(t), importers(t, "-test")
	for imp, by := range tests {
		if imp == mod+"/internal/cli" {
			for _, p := range by {
				if p != mod {
					t.Errorf("%s imports internal/cli: only package main may", p)
				}
			}
		}
	}
	for _, h := range helpers {
		for _, p := range code[mod+"/"+h] {
			if !slices.Contains(helpers, strings.TrimPrefix(p, mod+"/")) {
				t.Errorf("%s imports %s, a helper for tests only", p, h)
			}
		}
	}
	for _, b := range backends {
		for _, p := range code[mod+"/"+b] {
			if p != mod+"/internal/cli" && p != mod+"/internal/testkit/servetest" {
				t.Errorf("%s imports the backend %s: only internal/cli knows the backends", p, b)
			}
		}
	}
}

// deps is the set of packages that `go list -deps [flags]` lists, test
// variants ("p [q.test]") under their own path.
func deps(t *testing.T, args ...string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps %v: %v", args, err)
	}
	set := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		p, _, _ := strings.Cut(line, " ")
		set[strings.TrimSuffix(strings.TrimSuffix(p, "_test"), ".test")] = true
	}
	return set
}

// importers maps each of the module's packages to the module's packages
// (with -test: and their tests, the external ones as "p_test") that import
// it directly.
func importers(t *testing.T, flags ...string) map[string][]string {
	t.Helper()
	args := append(append([]string{"list"}, flags...), "-f", "{{.ImportPath}}|{{join .Imports \" \"}}", "./...")
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go %v: %v", args, err)
	}
	by := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		p, imports, _ := strings.Cut(line, "|")
		p, _, _ = strings.Cut(p, " ")
		if strings.HasSuffix(p, ".test") {
			continue // the generated test main imports the package under test
		}
		for _, imp := range strings.Fields(imports) {
			if strings.HasPrefix(imp, mod+"/") && !slices.Contains(by[imp], p) {
				by[imp] = append(by[imp], p)
			}
		}
	}
	return by
}
