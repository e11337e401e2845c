package sitetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Apache is Apache httpd with mod_php serving a Site's docroot (the stack
// BitrixVM runs behind its nginx); its script runs go into the Site's
// journal too.
type Apache struct {
	Addr string // 127.0.0.1:PORT
	URL  string // http://127.0.0.1:PORT
	Dir  string // ServerRoot (httpd.conf, error.log)
	proc *proc
}

// StartApache runs Apache (prefork MPM, mod_php) on a free loopback port
// serving s.Root, with directives added to its configuration after the
// modules are loaded; modules/ in them is Apache's module directory, as in
// a stock httpd.conf. It is stopped when the test ends.
func (s *Site) StartApache(t testing.TB, directives string) *Apache {
	t.Helper()
	mods := apacheModules(t, true)
	php, _ := filepath.Glob(filepath.Join(mods, "libphp*.so"))
	return s.startApache(t, mods, "mpm_prefork", fmt.Sprintf(`LoadModule php_module modules/%s
<FilesMatch "\.php$">
    SetHandler application/x-httpd-php
</FilesMatch>
php_admin_value auto_prepend_file %q
`, filepath.Base(php[len(php)-1]), s.Prepend), directives)
}

// apacheModules finds Apache's module directory (with mod_php when
// withPHP), or skips the test (fails it under CI).
func apacheModules(t testing.TB, withPHP bool) string {
	t.Helper()
	return need(t, "Apache's modules", func() (string, error) {
		for _, d := range []string{"/usr/lib/apache2/modules", "/usr/lib64/httpd/modules", "/usr/lib/httpd/modules"} {
			if _, err := os.Stat(filepath.Join(d, "mod_mpm_prefork.so")); err != nil {
				continue
			}
			if m, _ := filepath.Glob(filepath.Join(d, "libphp*.so")); len(m) > 0 || !withPHP {
				return d, nil
			}
		}
		if withPHP {
			return "", errors.New("no libphp*.so in Apache's module directories (Debian: apt-get install apache2 libapache2-mod-php)")
		}
		return "", errors.New("no Apache module directory (Debian: apt-get install apache2)")
	})
}

// startApache runs Apache with the MPM mpm ("mpm_prefork"), the lines
// php that hand .php files to PHP, and directives, serving s.Root.
func (s *Site) startApache(t testing.TB, mods, mpm, php, directives string) *Apache {
	t.Helper()
	bin := need(t, "apache2 (httpd)", func() (string, error) {
		if p, err := lookup("apache2", "/usr/sbin/apache2"); err == nil {
			return p, nil
		}
		return lookup("httpd", "/usr/sbin/httpd")
	})
	dir := tempDir(t, "sitetest-apache-")
	if err := os.Symlink(mods, filepath.Join(dir, "modules")); err != nil {
		t.Fatal(err)
	}
	owner := ""
	if os.Geteuid() == 0 {
		u, g := unprivileged(t)
		owner = fmt.Sprintf("User %s\nGroup %s\n", u, g)
	}
	addr, p := onFreePort(t, "apache", func(addr string) *proc {
		conf := fmt.Sprintf(`ServerRoot %[1]q
ServerName 127.0.0.1
Listen %[2]s
PidFile %[1]s/httpd.pid
DefaultRuntimeDir %[1]s
Mutex file:%[1]s default
ErrorLog %[1]s/error.log
LogLevel warn
%[3]sLoadModule %[4]s_module modules/mod_%[4]s.so
LoadModule authz_core_module modules/mod_authz_core.so
<IfModule !log_config_module>
    LoadModule log_config_module modules/mod_log_config.so
</IfModule>
StartServers 2
<IfModule mpm_prefork_module>
    MinSpareServers 1
    MaxSpareServers 3
</IfModule>
<IfModule mpm_event_module>
    ThreadsPerChild 4
    ServerLimit 2
</IfModule>
MaxRequestWorkers 8
LogFormat "%%a (peer %%{c}a) \"%%r\" %%>s" site
CustomLog %[1]s/access.log site
%[5]s
%[6]s
DocumentRoot %[7]q
<Directory %[7]q>
    Require all granted
</Directory>
`, dir, addr, owner, mpm, php, directives, s.Root)
		confPath := filepath.Join(dir, "httpd.conf")
		writeFile(t, confPath, conf, 0o644)
		if out, err := exec.Command(bin, "-t", "-f", confPath).CombinedOutput(); err != nil {
			t.Fatalf("sitetest: apache -t: %v\n%s\n%s", err, out, numbered(conf))
		}
		cmd := exec.Command(bin, "-f", confPath, "-DFOREGROUND")
		return start(t, "apache", cmd, dir, filepath.Join(dir, "error.log"), filepath.Join(dir, "access.log"))
	})
	return &Apache{Addr: addr, URL: "http://" + addr, Dir: dir, proc: p}
}
