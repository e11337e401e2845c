package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The repo explains itself: code cites the decision table's rows (README,
// "Decision table, in short") and the traps (ARCHITECTURE.md, "Traps") by
// number, and ARCHITECTURE.md's codemap names every package. These tests
// keep the citations and the codemap true.

var (
	// "trap 19", "Trap 1", "traps 25-27"
	trapCite = regexp.MustCompile(`(?i)\btraps? (\d+)(?:[-–](\d+))?`)
	// "row 10b", "rows 4 to 9", "rows 5, 9, 10, 10a", "rows 0a–0d"
	rowCite  = regexp.MustCompile(`\brows? ((?:\d+[a-d]?)(?:(?:, | and | to |[-–])\d+[a-d]?)*)`)
	rowToken = regexp.MustCompile(`\d+[a-d]?`)
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goFiles lists the repo's Go files as git tracks them.
func goFiles(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("git", "ls-files", "*.go").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	return strings.Fields(string(out))
}

func TestCitedTrapsAndRowsExist(t *testing.T) {
	arch := readFile(t, "ARCHITECTURE.md")
	traps := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(\d+)\. \*\*`).FindAllStringSubmatch(arch[strings.Index(arch, "## Traps"):], -1) {
		traps[m[1]] = true
	}
	readme := readFile(t, "README.md")
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+[a-d]?) \|`).FindAllStringSubmatch(readme, -1) {
		rows[m[1]] = true
	}
	if len(traps) < 20 || len(rows) < 15 {
		t.Fatalf("found %d traps in ARCHITECTURE.md and %d rows in README's decision table: the documents moved?", len(traps), len(rows))
	}
	for _, f := range goFiles(t) {
		src := readFile(t, f)
		for i, line := range strings.Split(src, "\n") {
			if !strings.Contains(line, "//") {
				continue
			}
			comment := line[strings.Index(line, "//"):]
			if strings.Contains(comment, "DESIGN.md") || strings.Contains(comment, "../shared") {
				t.Errorf("%s:%d cites a document outside the repo: %s", f, i+1, strings.TrimSpace(comment))
			}
			for _, m := range trapCite.FindAllStringSubmatch(comment, -1) {
				for _, n := range []string{m[1], m[2]} {
					if n != "" && !traps[n] {
						t.Errorf("%s:%d cites trap %s, which ARCHITECTURE.md does not have", f, i+1, n)
					}
				}
			}
			for _, m := range rowCite.FindAllStringSubmatch(comment, -1) {
				for _, n := range rowToken.FindAllString(m[1], -1) {
					if !rows[n] {
						t.Errorf("%s:%d cites row %s, which README's decision table does not have", f, i+1, n)
					}
				}
			}
		}
	}
}

func TestCodemapNamesEveryPackage(t *testing.T) {
	arch := readFile(t, "ARCHITECTURE.md")
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	wd, _ := os.Getwd()
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(wd, dir)
		if err != nil || rel == "." {
			continue
		}
		rel = filepath.ToSlash(rel) + "/"
		// A package is named by its own line or by an enclosing folder's
		// ("deploy/" covers deploy/demo/storm).
		named := false
		for p := rel; p != ""; {
			if strings.Contains(arch, "\n"+p) || strings.Contains(arch, "`"+p) || strings.Contains(arch, "**"+p) {
				named = true
				break
			}
			i := strings.LastIndex(strings.TrimSuffix(p, "/"), "/")
			if i < 0 {
				break
			}
			p = p[:i+1]
		}
		if !named {
			t.Errorf("ARCHITECTURE.md's codemap does not name %s", rel)
		}
	}
}
