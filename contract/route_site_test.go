package contract_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hookonce/hookonce/contract"
)

// routeOf is the first sender of the route Locate finds for an escaped
// path: "" when none, "400" when the path is refused.
func routeOf(t *testing.T, c *contract.Contract, escaped string) string {
	t.Helper()
	_, rt, err := c.Locate(escaped)
	switch {
	case errors.Is(err, contract.ErrBadPath), errors.Is(err, contract.ErrLookalikePath):
		return "400"
	case err != nil:
		t.Fatalf("Locate(%q): %v", escaped, err)
	case rt == nil:
		return ""
	}
	return rt.Senders[0].Name
}

func checkRoutes(t *testing.T, c *contract.Contract, want map[string]string) {
	t.Helper()
	for path, w := range want {
		if got := routeOf(t, c, path); got != w {
			t.Errorf("Locate(%q) = %q, want %q", path, got, w)
		}
	}
}

// A directory's sender owns its index script in every spelling, and an
// index script's sender owns its directory (site.index, default
// [index.php]).
func TestSiteIndexRoutes(t *testing.T) {
	c, err := contract.Parse([]byte(`
senders:
  - {name: dir, match: {path: /webhooks/payment}, key: [{body: id}]}
  - {name: idx, match: {path: /x/index.php}, key: [{body: id}]}
  - {name: root, match: {path: /index.php}, key: [{body: id}]}
  - {name: prefix, match: {path: /webhooks/*}, key: [{body: id}]}
`), "index.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %q", c.Warnings)
	}
	if got := c.Site; len(got.Index) != 1 || got.Index[0] != "index.php" || len(got.Extensions) != 0 {
		t.Errorf("default site = %+v", got)
	}
	checkRoutes(t, c, map[string]string{
		"/webhooks/payment":                     "dir",
		"/webhooks/payment/":                    "dir",
		"/webhooks/payment/index.php":           "dir",
		"/webhooks/payment/index.php/x":         "dir", // PATH_INFO
		"/webhooks/payment/index.php/a.php/b":   "dir",
		"/webhooks//payment/./index.php":        "dir",
		"/webhooks/payment/%69ndex.php":         "dir",
		"/webhooks/payment%2Findex.php":         "dir",
		"/webhooks/x/../payment/index.php/":     "dir",
		"/webhooks/payment/index.phpx":          "prefix",
		"/webhooks/payment/other.php":           "prefix", // another script: the prefix's
		"/webhooks/payment/status":              "prefix",
		"/webhooks/payment.php":                 "prefix", // no extensions: another file
		"/webhooks/payment/index":               "prefix", // no MultiViews (site.multiviews): another path
		"/x/index.php":                          "idx",
		"/x":                                    "idx",
		"/x/":                                   "idx",
		"//x/./":                                "idx",
		"/x/index.php/y":                        "idx",
		"/x/y":                                  "",
		"/":                                     "root",
		"/index.php/z":                          "root",
		"/webhooks/payment/INDEX.PHP":           "400", // a case-insensitive file system runs it
		"/Webhooks/Payment":                     "400",
		"/webhooks/payment/index.php.":          "400", // Windows drops trailing dots and spaces
		"/webhooks/payment/index.php%20":        "400",
		"/webhooks/payment/index.php::$DATA":    "400",
		"/X/Index.php/y":                        "400",
		"/WEBHOOKS/anything":                    "400", // the prefix's, folded
		"/catalog/Index.php":                    "",
		"/catalog/item.":                        "",
		"/webhooks/payment/index.php/Upper.":    "dir",
		"/webhooks/payment/index.php%00":        "400",
		"/webhooks/payment/index.php/%2e%2e/..": "prefix", // resolves to /webhooks
	})
}

// With site.extensions, a directory's sender owns "P.php" (and its
// PATH_INFO), a script's sender owns the path without the extension, and
// index beats extension beats prefix; an exact path beats all of them.
func TestSiteExtensionRoutes(t *testing.T) {
	c, err := contract.Parse([]byte(`
site:
  index: [index.php, default.php]
  extensions: [.php]
senders:
  - {name: dir, match: {path: /hooks/notify}, key: [{body: id}]}
  - {name: cb, match: {path: /pay/cb.php}, key: [{body: id}]}
  - {name: pay, match: {path: /webhooks/payment}, key: [{body: id}]}
  - {name: exact, match: {path: /hooks/notify.php/special}, key: [{body: id}]}
  - {name: prefix, match: {path: /hooks/*}, key: [{body: id}]}
`), "ext.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkRoutes(t, c, map[string]string{
		"/hooks/notify":                  "dir",
		"/hooks/notify.php":              "dir",
		"/hooks/notify%2ephp/x":          "dir",
		"/hooks/notify/index.php":        "dir",
		"/hooks/notify/index":            "dir", // index + .php
		"/hooks/notify/default.php/x":    "dir",
		"/hooks/notify/default":          "dir",
		"/hooks/notify.php/special":      "exact",
		"/hooks/notify.phpx":             "prefix",
		"/hooks/notify/other":            "prefix",
		"/pay/cb.php":                    "cb",
		"/pay/cb":                        "cb",
		"/pay/cb/":                       "cb",
		"/pay/cb/x":                      "", // try_files tries /pay/cb/x.php
		"/pay/cb.php/x":                  "cb",
		"/webhooks/payment/index":        "pay",
		"/webhooks/payment.php/x":        "pay",
		"/webhooks/payment.PHP":          "400",
		"/webhooks/payment/index.php/..": "pay", // resolves to the directory
	})
}

// Two senders whose paths run one script are allowed, with a warning that
// says which senders judge the shared path.
func TestSiteAliasConflicts(t *testing.T) {
	c, err := contract.Parse([]byte(`
site: {extensions: [.php]}
senders:
  - {name: dir, match: {path: /x}, key: [{body: id}]}
  - {name: idx, match: {path: /x/index.php}, key: [{body: id}]}
  - {name: a, match: {path: /a}, key: [{body: id}]}
  - {name: b, match: {path: /a.php}, key: [{body: id}]}
  - {name: c, match: {path: /c}, key: [{body: id}]}
  - {name: c2, match: {path: /c/index}, key: [{body: id}]}
`), "clash.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkRoutes(t, c, map[string]string{"/x": "dir", "/x/": "dir", "/x/index.php": "idx", "/a": "a", "/a.php": "b", "/c/index": "c2", "/c/index.php": "c"})
	got := strings.Join(c.Warnings, "\n")
	if len(c.Warnings) != 3 {
		t.Errorf("%d warnings, want 3:\n%s", len(c.Warnings), got)
	}
	for _, w := range []string{
		"clash.yaml: paths /x and /x/index.php run one script",
		"clash.yaml: paths /a and /a.php run one script",
		"clash.yaml: paths /c and /c/index run one script",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("missing warning %q in:\n%s", w, got)
		}
	}
}

func TestSiteConfig(t *testing.T) {
	c, err := contract.Parse([]byte("site: {index: [], extensions: [.php, .phtml]}\nsenders:\n  - {name: d, match: {path: /d}, key: [{body: id}]}\n"), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Site.Index) != 0 || strings.Join(c.Site.Extensions, ",") != ".php,.phtml" {
		t.Errorf("site = %+v", c.Site)
	}
	checkRoutes(t, c, map[string]string{"/d/index.php": "", "/d.phtml/x": "d"})

	// Every entry but index[0] and extensions[3] is bad; line numbers
	// below count from "site:" on line 1.
	const badSite = `site:
  index:
    - index.php
    - a/b.php
    - ""
    - ".."
  extensions: [php, ".", .p/x, .php]
`

	_, err = contract.Parse([]byte(badSite+"  other: 1\n"), "bad.yaml")
	if err == nil || !strings.Contains(err.Error(), `bad.yaml:8: field site.other: unknown setting "other" (known here: extensions, index, multiviews, request)`) {
		t.Errorf("unknown field: %v", err)
	}
	_, err = contract.Parse([]byte(badSite), "bad.yaml")
	var ce *contract.Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v", err)
	}
	msg := err.Error()
	for _, w := range []string{
		`bad.yaml:4: field site.index[1]: "a/b.php": a file name, without /, % or NUL`,
		`bad.yaml:5: field site.index[2]: "": want a file name such as index.php`,
		`bad.yaml:6: field site.index[3]: "..": want a file name`,
		`bad.yaml:7: field site.extensions[0]: "php": want an extension such as .php`,
		`bad.yaml:7: field site.extensions[1]: ".": want an extension`,
		`bad.yaml:7: field site.extensions[2]: ".p/x": want an extension`,
	} {
		if !strings.Contains(msg, w) {
			t.Errorf("missing %q in:\n%s", w, msg)
		}
	}
	if strings.Contains(msg, "extensions[3]") || strings.Contains(msg, "index[0]") {
		t.Errorf("valid entries reported:\n%s", msg)
	}
}
