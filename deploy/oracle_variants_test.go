package deploy_test

// The differential oracle (oracle_test.go) across the site setups shops
// run, not only the shipped one: each variant is a PHP site of another
// kind or with another setting, with hookonce in front of it, and every
// generated request (oracle_gen_test.go: path spellings, forms, header
// spellings that CGI merges, duplicates, obs-fold, cookies, chunked
// bodies) goes two ways, as raw bytes over TCP:
//
//   - hookonce: to hookonce, which judges it and forwards it to the
//     variant's site, as in production;
//   - alone: the same bytes to a judge that reads them as hookonce does
//     (net/http, then Contract.Inspect) and forwards nothing, and to the
//     variant's site itself: what hookonce reads against what the site
//     reads from the very same bytes. hookonce's HTTP server refusing
//     the bytes (a 400 before anything is judged) is counted, not
//     compared; so is the site's own client-address handling, which in
//     production is hookonce's (the site trusts hookonce's X-Real-IP).
//
// Each variant must compare at least oracleMinCompared requests on a
// sender's route per way, and its disagreements are printed per variant.
// A variant whose server is not installed is skipped, saying which
// (under CI: failed, internal/testkit/testenv). docs/deployment.md, "Site setups
// hookonce is checked against", lists them and what each one means for
// an operator.
//
// HOOKONCE_ORACLE_N and HOOKONCE_ORACLE_SEED run more or other requests,
// HOOKONCE_ORACLE_VARIANT one variant (a substring of its name).

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/sitetest"
)

// oracleVariant is one site setup.
type oracleVariant struct {
	name string
	// start starts the site with the oracle's scripts and returns the URL
	// hookonce forwards to; it sets o.site and o.data.
	start    func(t *testing.T, o *oracle) string
	noRealIP bool   // REMOTE_ADDR cannot come from hookonce's X-Real-IP
	config   string // added to the oracle's hookonce.yaml, as the docs tell the operator
	// documented: see oracle.documented.
	documented func(c oracleCase, d string) string
}

// nginxSite starts the shipped site server (nginx/hookonce-site.conf) with
// directive added to its server block.
func nginxSite(directive string, noIni bool) func(t *testing.T, o *oracle) string {
	return func(t *testing.T, o *oracle) string {
		o.site = sitetest.Start(t, sitetest.Options{
			Scripts:  oracleScripts(),
			NoPHPIni: noIni,
			Server: func(c sitetest.Conf) string {
				conf := siteConf(t, c)
				if directive != "" {
					conf = mustReplace(t, "nginx/hookonce-site.conf", conf, "    root "+c.Root+";", "    "+directive+"\n    root "+c.Root+";")
				}
				return conf
			},
		})
		o.data = o.site.Data
		return o.site.URL
	}
}

// apacheSite starts Apache in front of the site's PHP, with
// apache/hookonce-remoteip.conf (REMOTE_ADDR from hookonce's X-Real-IP),
// index.php as the directory index, and directives; fpm hands PHP to
// php-fpm (mod_proxy_fcgi), else mod_php runs it (prefork).
func apacheSite(fpm bool, directives func(root string) string) func(t *testing.T, o *oracle) string {
	return func(t *testing.T, o *oracle) string {
		o.site = sitetest.Start(t, sitetest.Options{Scripts: oracleScripts()})
		o.data = o.site.Data
		remoteip, err := filepath.Abs("apache/hookonce-remoteip.conf")
		if err != nil {
			t.Fatal(err)
		}
		d := "Include " + remoteip + "\n" + directives(o.site.Root)
		if fpm {
			return o.site.StartApacheFPM(t, d).URL
		}
		return o.site.StartApache(t, "LoadModule dir_module modules/mod_dir.so\nDirectoryIndex index.php\n"+d).URL
	}
}

// multiViews turns MultiViews on for the docroot, with .php a known type
// (AddType, as older setups and control panels have it): /hooks/pay then
// runs hooks/pay.php.
func multiViews(root string) string {
	return fmt.Sprintf(`LoadModule negotiation_module modules/mod_negotiation.so
AddType application/x-httpd-php .php
<Directory %q>
    Options +MultiViews
</Directory>
`, root)
}

func oracleVariants() []oracleVariant {
	return []oracleVariant{
		{name: "nginx+php-fpm (shipped, php.ini request_order=GP)", start: nginxSite("", false)},
		{name: "nginx underscores_in_headers on", start: nginxSite("underscores_in_headers on;", false)},
		{name: "nginx merge_slashes off", start: nginxSite("merge_slashes off;", false)},
		{name: "PHP defaults (no php.ini: request_order unset, variables_order EGPCS)", start: nginxSite("", true)},
		{name: "Apache 2.4 + mod_php (prefork)", start: apacheSite(false, func(string) string { return "" })},
		{name: "Apache + php-fpm, AllowEncodedSlashes On, MultiViews on", config: "site: {multiviews: true}\n", start: apacheSite(true, func(root string) string {
			return "AllowEncodedSlashes On\n" + multiViews(root)
		})},
		{name: "Apache + php-fpm, AllowEncodedSlashes NoDecode, MultiViews off", start: apacheSite(true, func(string) string {
			return "AllowEncodedSlashes NoDecode\n"
		})},
		{name: "php -S (built-in server)", noRealIP: true, documented: builtinDocumented, start: func(t *testing.T, o *oracle) string {
			o.site = sitetest.Start(t, sitetest.Options{Scripts: oracleScripts()})
			o.data = o.site.Data
			return o.site.StartBuiltin(t).URL
		}},
	}
}

// builtinDocumented: php -S runs the nearest index.php above a path that
// names no file, so a directory sender path owns every path below it
// there (docs/deployment.md: declare it with /*, or do not serve webhooks
// with php -S); and it keeps only the first line of a folded header,
// where hookonce (Go) joins the lines, which matters only when the same
// bytes reach php -S without hookonce.
func builtinDocumented(c oracleCase, d string) string {
	switch {
	case strings.HasPrefix(d, "bypass: PHP ran ") && strings.Contains(d, "/index.php (route "):
		return "php -S: nearest index.php"
	case strings.HasPrefix(d, "header ") && strings.Contains(c.what, "obs-fold"):
		return "php -S: obs-fold"
	}
	return ""
}

// oracleMinCompared is how many requests each way of each variant must
// compare on a sender's route, for n generated requests.
func oracleMinCompared(n int) int { return n / 12 }

func TestOracleSiteVariants(t *testing.T) {
	n, seed := oracleN(t)
	if os.Getenv("HOOKONCE_ORACLE_N") == "" {
		n = 300 // eight variants, two ways each: the default suite's share
	}
	cases := oracleCases(n, seed)
	only := os.Getenv("HOOKONCE_ORACLE_VARIANT")
	var summary []string
	for _, v := range oracleVariants() {
		if only != "" && !strings.Contains(v.name, only) {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			start := time.Now()
			o := &oracle{t: t, judged: map[string]*judged{}, noRealIP: v.noRealIP, config: v.config, documented: v.documented}
			site := v.start(t, o)
			o.startHookonce(t, site)
			for _, way := range []string{"hookonce", "alone"} {
				tl := o.run(way, cases, func(c oracleCase, id string) {
					if way == "hookonce" {
						sendRaw(t, o.ho.URL, c, id)
						return
					}
					sendRaw(t, o.judge.URL, c, id)
					sendRaw(t, site, c, id)
				})
				line := fmt.Sprintf("%s, %s: %s", v.name, way, tl.summary(seed))
				t.Log("oracle: " + line)
				summary = append(summary, line)
				if min := oracleMinCompared(n); tl.compared < min {
					t.Errorf("%s: %d requests compared on a sender's route, want at least %d: the oracle checked too little", way, tl.compared, min)
				}
				tl.fail(t, way)
				for i, d := range tl.documentedEx {
					if i == 5 {
						break
					}
					t.Logf("%s: documented: %s", way, d)
				}
			}
			t.Logf("oracle: %s took %v", v.name, time.Since(start).Round(time.Millisecond))
		})
	}
	if f := os.Getenv("HOOKONCE_ORACLE_REPORT"); f != "" {
		_ = os.WriteFile(f, []byte(strings.Join(summary, "\n")+"\n"), 0o644)
	}
}
