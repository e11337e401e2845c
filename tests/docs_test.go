package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The repo explains itself: code cites the decision table's rows
// (docs/decision-table.md) and the traps (ARCHITECTURE.md, "Traps") by
// number, ARCHITECTURE.md's codemap names every package, and every link in
// README.md, ARCHITECTURE.md and docs/ resolves. These tests keep the
// citations, the codemap and the links true.

var (
	// "trap 19", "Trap 1", "traps 25-27"
	trapCite = regexp.MustCompile(`(?i)\btraps? (\d+)(?:[-–](\d+))?`)
	// "row 10b", "rows 4 to 9", "rows 5, 9, 10, 10a", "rows 0a–0d"
	rowCite  = regexp.MustCompile(`\brows? ((?:\d+[a-e]?)(?:(?:, | and | to |[-–])\d+[a-e]?)*)`)
	rowToken = regexp.MustCompile(`\d+[a-e]?`)
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
	readme := readFile(t, "docs/decision-table.md")
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+[a-e]?) \|`).FindAllStringSubmatch(readme, -1) {
		rows[m[1]] = true
	}
	if len(traps) < 20 || len(rows) < 15 {
		t.Fatalf("found %d traps in ARCHITECTURE.md and %d rows in docs/decision-table.md: the documents moved?", len(traps), len(rows))
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
						t.Errorf("%s:%d cites row %s, which docs/decision-table.md does not have", f, i+1, n)
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

// mdLink is a Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// anchor is GitHub's anchor for a heading: lower case, punctuation other
// than - and _ dropped, spaces as -.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocLinksResolve: every relative link in README.md, ARCHITECTURE.md
// and docs/ names a file of the repo, and an #anchor a heading in it; the
// README stays a page a newcomer reads to the end.
func TestDocLinksResolve(t *testing.T) {
	pages := []string{"README.md", "ARCHITECTURE.md"}
	docs, _ := filepath.Glob("docs/*.md")
	if len(docs) < 6 {
		t.Fatalf("docs/ has %d pages", len(docs))
	}
	pages = append(pages, docs...)
	headings := func(path string) map[string]bool {
		out := map[string]bool{}
		for _, line := range strings.Split(readFile(t, path), "\n") {
			if strings.HasPrefix(line, "#") {
				out[anchor(strings.TrimLeft(line, "#"))] = true
			}
		}
		return out
	}
	links := 0
	for _, page := range pages {
		for _, m := range mdLink.FindAllStringSubmatch(readFile(t, page), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, frag, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s: no such file", page, target)
				continue
			}
			if frag != "" && strings.HasSuffix(path, ".md") && !headings(path)[frag] {
				t.Errorf("%s links to %s: %s has no heading #%s", page, target, path, frag)
			}
		}
	}
	if links < 10 {
		t.Errorf("only %d links checked: the pages lost their links?", links)
	}
	if n := len(readFile(t, "README.md")); n > 15<<10 {
		t.Errorf("README.md is %d bytes: keep it a page a newcomer finishes (move the rest to docs/)", n)
	}
}

// readmeBlock is the fenced block after marker in README.md, dedented by
// the three spaces of its list item.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	_, rest, ok := strings.Cut(readFile(t, "README.md"), marker)
	if !ok {
		t.Fatalf("README.md has no %s", marker)
	}
	_, rest, _ = strings.Cut(rest, "```yaml\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("README.md: the block after %s does not end", marker)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSuffix(block, "   "), "\n") {
		out = append(out, strings.TrimPrefix(line, "   "))
	}
	return strings.Join(out, "\n")
}

// TestOneBitrixConfig: the README's quick-start config, the example in the
// source and the config the packages install are one file, byte for byte
// (deploy/quickstart_test.go runs it against nginx and php-fpm).
func TestOneBitrixConfig(t *testing.T) {
	example := readFile(t, "hookonce.example.yaml")
	if got := readmeBlock(t, "<!-- quickstart-config -->"); got != example {
		t.Errorf("README.md's quick-start config is not hookonce.example.yaml:\n%s", got)
	}
	if got := readFile(t, "deploy/packages/hookonce.yaml"); got != example {
		t.Errorf("deploy/packages/hookonce.yaml is not hookonce.example.yaml:\n%s", got)
	}
}

// TestUserDocsSpeakPlainly: the pages and files an operator reads carry
// no words of hookonce's own making ("the spec", "oracle", "trap", decision
// table rows): those live in ARCHITECTURE.md and docs/decision-table.md.
func TestUserDocsSpeakPlainly(t *testing.T) {
	internal := regexp.MustCompile(`(?i)\bthe spec\b|\boracles?\b|\btraps?\b|\brows? \d+[a-e]?\b`)
	files := []string{"README.md", "CHANGELOG.md", "docs/deployment.md", "docs/stores.md", "docs/troubleshooting.md", "hookonce.example.yaml"}
	for _, pattern := range []string{"deploy/packages/*", "deploy/nginx/*", "deploy/systemd/*", "deploy/apache/*"} {
		m, _ := filepath.Glob(pattern)
		for _, f := range m {
			if fi, err := os.Stat(f); err == nil && !fi.IsDir() && !strings.HasSuffix(f, ".sh") {
				files = append(files, f)
			}
		}
	}
	for _, f := range files {
		for i, line := range strings.Split(readFile(t, f), "\n") {
			if m := internal.FindString(line); m != "" {
				t.Errorf("%s:%d says %q: write it for the shop's operator", f, i+1, m)
			}
		}
	}
}

// TestTroubleshootingAnchors: the alerts and the README link to one
// section per status the provider sees, by these anchors.
func TestTroubleshootingAnchors(t *testing.T) {
	page := readFile(t, "docs/troubleshooting.md")
	have := map[string]bool{}
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "## ") {
			have[anchor(strings.TrimPrefix(line, "## "))] = true
		}
	}
	for _, a := range []string{"401", "403", "422", "503"} {
		if !have[a] {
			t.Errorf("docs/troubleshooting.md has no section #%s (a heading \"## %s\")", a, a)
		}
	}
}
