package main_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The import rules of ARCHITECTURE.md, checked rather than hoped for.
func TestImportRules(t *testing.T) {
	const mod = "github.com/hookonce/hookonce/"
	rules := map[string][]string{ // package → what it must never import
		"contract":        {"dedupe", "proxy", "admin", "probe"},
		"dedupe":          {"contract", "proxy", "admin", "dedupe/sqlite", "dedupe/postgres", "dedupe/redis"},
		"dedupe/sqlite":   {"contract", "proxy", "admin", "dedupe/postgres", "dedupe/redis"},
		"dedupe/postgres": {"contract", "proxy", "admin", "dedupe/sqlite", "dedupe/redis"},
		"dedupe/redis":    {"contract", "proxy", "admin", "dedupe/sqlite", "dedupe/postgres"},
		"dedupe/cache":    {"contract", "proxy", "admin", "dedupe/sqlite", "dedupe/postgres", "dedupe/redis"},
		"proxy":           {"admin", "probe", "dedupe/sqlite", "dedupe/postgres", "dedupe/redis"},
		"admin":           {"proxy", "probe", "dedupe/sqlite", "dedupe/postgres", "dedupe/redis"},
		"probe":           {"proxy", "admin", "dedupe", "contract"},
	}
	for pkg, banned := range rules {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./"+pkg).Output()
		if err != nil {
			t.Fatalf("go list ./%s: %v", pkg, err)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		for _, b := range banned {
			if deps[mod+b] {
				t.Errorf("%s imports %s (directly or not): ARCHITECTURE.md forbids it", pkg, b)
			}
		}
	}
}
