package sitetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The other servers a PHP site runs behind, for tests that must hold on
// every setup a shop runs (deploy/oracle_variants_test.go): Apache handing
// PHP to the site's php-fpm through mod_proxy_fcgi, and PHP's built-in
// server (php -S). Both serve the Site's docroot and record their runs in
// its journal.

// StartApacheFPM runs Apache (event MPM) serving s.Root with .php files
// handed to the site's PHP over FastCGI (mod_proxy_fcgi, as Debian's
// php8.2-fpm Apache configuration does), index.php as the directory
// index, and directives added after the modules are loaded (modules/ is
// Apache's module directory). It is stopped when the test ends.
func (s *Site) StartApacheFPM(t testing.TB, directives string) *Apache {
	t.Helper()
	mods := apacheModules(t, false)
	sock := strings.TrimPrefix(s.FastCGI, "unix:")
	types := "/etc/mime.types"
	if _, err := os.Stat(types); err != nil {
		types = os.DevNull
	}
	return s.startApache(t, mods, "mpm_event", fmt.Sprintf(`LoadModule proxy_module modules/mod_proxy.so
LoadModule proxy_fcgi_module modules/mod_proxy_fcgi.so
LoadModule dir_module modules/mod_dir.so
LoadModule mime_module modules/mod_mime.so
TypesConfig %s
DirectoryIndex index.php index.html
<FilesMatch ".+\.ph(ar|p|tml)$">
    SetHandler "proxy:unix:%s|fcgi://localhost"
</FilesMatch>
`, types, sock), directives)
}

// Builtin is PHP's built-in web server (php -S) on loopback.
type Builtin struct {
	Addr string // 127.0.0.1:PORT
	URL  string // http://127.0.0.1:PORT
	proc *proc
}

// StartBuiltin runs `php -S` on a free loopback port serving s.Root with
// s.Prepend recording runs, three workers (PHP_CLI_SERVER_WORKERS), and
// the ini settings given ("name=value"). It is stopped when the test ends.
func (s *Site) StartBuiltin(t testing.TB, ini ...string) *Builtin {
	t.Helper()
	bin := need(t, "php (php-cli)", func() (string, error) { return lookup("php", "/usr/bin/php[0-9]*") })
	dir := tempDir(t, "sitetest-php-s-")
	addr, p := onFreePort(t, "php -S", func(addr string) *proc {
		args := []string{"-S", addr, "-t", s.Root,
			"-d", "auto_prepend_file=" + s.Prepend, "-d", "log_errors=1", "-d", "display_errors=0",
			"-d", "error_log=" + filepath.Join(dir, "php-error.log")}
		for _, kv := range ini {
			args = append(args, "-d", kv)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "PHP_CLI_SERVER_WORKERS=3"}
		return start(t, "php-s", cmd, dir, filepath.Join(dir, "php-error.log"))
	})
	return &Builtin{Addr: addr, URL: "http://" + addr, proc: p}
}
