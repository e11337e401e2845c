package sitetest_test

import (
	"testing"

	"github.com/hookonce/hookonce/internal/testkit/sitetest"
)

const requestOrder = `<?php
sitetest_id(($_REQUEST['id'] ?? '') . '/' . ini_get('request_order'));
echo "ran\n";
`

// Apache with php-fpm (mod_proxy_fcgi, index.php as the directory index)
// and php -S serve the site's scripts, and their runs are recorded.
func TestOtherServersServeTheSite(t *testing.T) {
	s := sitetest.Start(t, sitetest.Options{Scripts: map[string]string{"hooks/a.php": hook, "d/index.php": hook}})
	for name, url := range map[string]string{
		"apache-fpm": s.StartApacheFPM(t, "").URL,
		"php-S":      s.StartBuiltin(t).URL,
	} {
		for _, id := range []string{name, name + "-dir"} {
			p := "/hooks/a.php?id=" + id
			if id != name {
				p = "/d/?id=" + id
			}
			if status, body := get(t, "127.0.0.1", url+p); status != 200 || body != "ran "+id+" for 127.0.0.1\n" {
				t.Fatalf("%s %s: %d %q", name, p, status, body)
			}
		}
		if n := s.Count(t, "", name); n != 1 {
			t.Errorf("%s: %d runs recorded, want 1", name, n)
		}
	}
}

// NoPHPIni runs PHP on its built-in defaults: request_order unset, so
// $_REQUEST holds cookies.
func TestNoPHPIni(t *testing.T) {
	for _, noIni := range []bool{false, true} {
		s := sitetest.Start(t, sitetest.Options{Scripts: map[string]string{"r.php": requestOrder}, NoPHPIni: noIni})
		get(t, "127.0.0.1", s.URL+"/r.php", "Cookie", "id=c")
		runs := s.Runs(t)
		want := "/GP" // Debian's php.ini-production
		if noIni {
			want = "c/"
		}
		if len(runs) != 1 || runs[0].ID != want {
			t.Errorf("NoPHPIni %v: runs %+v, want id %q", noIni, runs, want)
		}
	}
}
