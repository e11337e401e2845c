// Package sitetest runs a real PHP site for tests, so that what a test
// counts is what a shop's handler would have done: nginx on 127.0.0.1 at a
// random port, serving a throwaway docroot of PHP scripts through php-fpm
// with the PHP location Debian ships (snippets/fastcgi-php.conf: PATH_INFO,
// try_files $fastcgi_script_name), and a journal in which every script run
// is recorded — script, method, the id the script read, REMOTE_ADDR, the
// Idempotency-Key header — read back with Site.Runs. php-cgi -b stands in
// for php-fpm where php-fpm is absent (SITETEST_PHP=php-cgi insists on it,
// SITETEST_PHP=php-fpm on php-fpm).
//
// StartNginx runs any other nginx configuration the same way (a front
// nginx from deploy/nginx, for example). Site.StartApache (mod_php),
// Site.StartApacheFPM (mod_proxy_fcgi to the site's PHP) and
// Site.StartBuiltin (php -S) serve the same docroot from the other
// servers shops run PHP behind; Options.NoPHPIni runs PHP on its built-in
// defaults instead of Debian's php.ini.
//
// Every server lives in its own temporary directory, is stopped by its PID
// when the test ends, and shows its logs when the test failed. Run as root,
// nginx's workers run as nobody and php-fpm's as www-data (or nobody), so
// the docroot is world-readable and the journal and Site.Data
// world-writable. Without nginx or PHP the test is skipped, or fails when
// CI is set.
package sitetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/testenv"
)

// Conf is what a site's nginx server block must use.
type Conf struct {
	Listen  string // "127.0.0.1:PORT", for listen
	Root    string // the docroot, for root
	FastCGI string // PHP's FastCGI address, for fastcgi_pass ("unix:/…/php.sock")
}

// Options describe a site.
type Options struct {
	// Scripts are written into the docroot: a path relative to it
	// ("bitrix/tools/stripe.php") → PHP source. Scripts call
	// sitetest_id($id) to record the id they read (see Run.ID).
	Scripts map[string]string
	// Server returns the nginx server block to run; nil runs
	// DefaultServer(c, Directives). Relative includes (snippets/fastcgi-php.conf,
	// fastcgi_params, fastcgi.conf) resolve to Debian's files, copied into
	// the throwaway conf directory.
	Server func(c Conf) string
	// Directives are extra lines for the default server block, such as
	// "set_real_ip_from 127.0.0.1; real_ip_header X-Real-IP;".
	Directives string
	// NoPHPIni runs PHP with no php.ini (-n): PHP's built-in defaults
	// (request_order unset, variables_order "EGPCS", so $_REQUEST holds
	// cookies) instead of Debian's php.ini-production ones.
	NoPHPIni bool
}

// DefaultServer is a server block as a Debian shop on nginx + php-fpm has
// it: the docroot, and every path with ".php" followed by "/" or its end
// handed to PHP with the script and PATH_INFO split as Debian's snippet
// splits them (at the first ".php/"), 404 when the script does not exist.
func DefaultServer(c Conf, directives string) string {
	return fmt.Sprintf(`server {
    listen %s;
    root %s;
    index index.php;
    %s
    location ~ \.php(/|$) {
        include snippets/fastcgi-php.conf;
        fastcgi_pass %s;
    }
}
`, c.Listen, c.Root, directives, c.FastCGI)
}

// Run is one execution of a PHP script, as the script saw it.
type Run struct {
	Script         string `json:"script"`    // SCRIPT_NAME
	PathInfo       string `json:"path_info"` // PATH_INFO
	URI            string `json:"uri"`       // REQUEST_URI
	Method         string `json:"method"`
	ID             string `json:"id"` // what the script passed to sitetest_id
	RemoteAddr     string `json:"remote_addr"`
	IdempotencyKey string `json:"idempotency_key"`
	Status         int    `json:"status"` // the answer's status when the script ended
}

// Site is a running PHP site.
type Site struct {
	*Nginx
	Root    string // the docroot
	Data    string // writable by the PHP workers (SQLite files …); ../data from the docroot
	FastCGI string // PHP's FastCGI address, as fastcgi_pass takes it
	// Prepend is the auto_prepend_file that records runs: give it to
	// another PHP (Apache's mod_php) serving Root to count its runs too.
	Prepend string
	journal string
}

// Runs returns every script run so far, in the order they ended.
func (s *Site) Runs(t testing.TB) []Run {
	t.Helper()
	b, err := os.ReadFile(s.journal)
	if err != nil {
		t.Fatalf("sitetest: journal: %v", err)
	}
	var runs []Run
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var r Run
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("sitetest: journal line %q: %v", sc.Text(), err)
		}
		runs = append(runs, r)
	}
	return runs
}

// Count returns how many runs match: script "" matches any script, id ""
// any id.
func (s *Site) Count(t testing.TB, script, id string) int {
	t.Helper()
	n := 0
	for _, r := range s.Runs(t) {
		if (script == "" || r.Script == script) && (id == "" || r.ID == id) {
			n++
		}
	}
	return n
}

// prepend is auto_prepend_file for every script: it defines sitetest_id
// and appends the run to the journal when the script ends (exit, die and
// fatal errors included), under an exclusive lock.
const prepend = `<?php
function sitetest_id(string $id): string { $GLOBALS['__sitetest_id'] = $id; return $id; }
register_shutdown_function(function () {
    $line = json_encode([
        'script' => $_SERVER['SCRIPT_NAME'] ?? '',
        'path_info' => $_SERVER['PATH_INFO'] ?? '',
        'uri' => $_SERVER['REQUEST_URI'] ?? '',
        'method' => $_SERVER['REQUEST_METHOD'] ?? '',
        'id' => $GLOBALS['__sitetest_id'] ?? '',
        'remote_addr' => $_SERVER['REMOTE_ADDR'] ?? '',
        'idempotency_key' => $_SERVER['HTTP_IDEMPOTENCY_KEY'] ?? '',
        'status' => http_response_code() ?: 200,
    ], JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE) . "\n";
    $f = fopen(%q, 'ab');
    flock($f, LOCK_EX);
    fwrite($f, $line);
    fflush($f);
    flock($f, LOCK_UN);
    fclose($f);
});
`

// Start runs a site for the test and stops it when the test ends.
func Start(t testing.TB, o Options) *Site {
	t.Helper()
	ngx := need(t, "nginx", findNginx)
	fpm, cgi := findPHP(t)
	dir := tempDir(t, "sitetest-php-")
	s := &Site{Root: filepath.Join(dir, "www"), Data: filepath.Join(dir, "data")}
	s.journal = filepath.Join(s.Data, "runs.jsonl")
	s.FastCGI = "unix:" + filepath.Join(dir, "php.sock")
	mkdir(t, s.Root, 0o755)
	mkdir(t, s.Data, 0o777)
	writeFile(t, s.journal, "", 0o666)
	s.Prepend = filepath.Join(dir, "prepend.php")
	writeFile(t, s.Prepend, fmt.Sprintf(prepend, s.journal), 0o644)
	for name, src := range o.Scripts {
		p := filepath.Join(s.Root, filepath.FromSlash(name))
		for d := filepath.Dir(p); d != s.Root && d != "/"; d = filepath.Dir(d) {
			mkdir(t, d, 0o755)
		}
		writeFile(t, p, src, 0o644)
	}

	if fpm != "" {
		startFPM(t, fpm, dir, o.NoPHPIni)
	} else {
		startCGI(t, cgi, dir, o.NoPHPIni)
	}
	server := o.Server
	if server == nil {
		server = func(c Conf) string { return DefaultServer(c, o.Directives) }
	}
	s.Nginx = startNginx(t, ngx, "sitetest-nginx-", func(listen string) string {
		return server(Conf{Listen: listen, Root: s.Root, FastCGI: s.FastCGI})
	}, nil)
	return s
}

// startFPM runs php-fpm in the foreground with one pool of three workers
// on a unix socket in dir; as root the workers run as www-data (or nobody).
func startFPM(t testing.TB, bin, dir string, noIni bool) {
	t.Helper()
	sock := filepath.Join(dir, "php.sock")
	owner := ""
	if os.Geteuid() == 0 {
		u, g := unprivileged(t)
		owner = fmt.Sprintf("user = %s\ngroup = %s\n", u, g)
	}
	conf := fmt.Sprintf(`[global]
pid = %[1]s/php-fpm.pid
error_log = %[1]s/php-fpm.log
daemonize = no

[site]
%[2]slisten = %[3]s
listen.mode = 0666
pm = static
pm.max_children = 3
catch_workers_output = yes
decorate_workers_output = no
php_admin_value[auto_prepend_file] = %[1]s/prepend.php
php_admin_value[error_log] = %[1]s/php-error.log
php_admin_flag[log_errors] = on
php_admin_flag[display_errors] = off
`, dir, owner, sock)
	writeFile(t, filepath.Join(dir, "php-fpm.conf"), conf, 0o644)
	args := []string{"--nodaemonize", "--fpm-config", filepath.Join(dir, "php-fpm.conf")}
	if noIni {
		args = append(args, "-n")
	}
	cmd := exec.Command(bin, args...)
	p := start(t, "php-fpm", cmd, dir, filepath.Join(dir, "php-fpm.log"), filepath.Join(dir, "php-error.log"))
	p.waitDial(t, "unix", sock)
}

// startCGI runs php-cgi as a FastCGI server (three children) on a unix
// socket in dir; it runs as the test's user.
func startCGI(t testing.TB, bin, dir string, noIni bool) {
	t.Helper()
	sock := filepath.Join(dir, "php.sock")
	var args []string
	if noIni {
		args = append(args, "-n")
	}
	cmd := exec.Command(bin, append(args, "-b", sock,
		"-d", "auto_prepend_file="+filepath.Join(dir, "prepend.php"),
		"-d", "error_log="+filepath.Join(dir, "php-error.log"),
		"-d", "log_errors=1", "-d", "display_errors=0")...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "PHP_FCGI_CHILDREN=3", "PHP_FCGI_MAX_REQUESTS=0"}
	p := start(t, "php-cgi", cmd, dir, filepath.Join(dir, "php-error.log"))
	p.waitDial(t, "unix", sock)
	_ = os.Chmod(sock, 0o666) // nginx workers run as nobody
}

// Nginx is one nginx server on loopback.
type Nginx struct {
	Addr string // 127.0.0.1:PORT
	URL  string // http://127.0.0.1:PORT
	Dir  string // prefix and conf directory (nginx.conf, error.log)
	proc *proc
}

// NginxOptions describe an nginx server for StartNginx.
type NginxOptions struct {
	// HTTP returns the contents of the http {} block given the address to
	// listen on ("127.0.0.1:PORT").
	HTTP func(listen string) string
	// Files are written into the conf directory (name → contents), where
	// relative includes look for them.
	Files map[string]string
}

// StartNginx runs nginx with o.HTTP's configuration and stops it when the
// test ends.
func StartNginx(t testing.TB, o NginxOptions) *Nginx {
	t.Helper()
	return startNginx(t, need(t, "nginx", findNginx), "sitetest-nginx-", o.HTTP, o.Files)
}

// ErrorLog returns nginx's error log.
func (n *Nginx) ErrorLog() string {
	b, _ := os.ReadFile(filepath.Join(n.Dir, "error.log"))
	return string(b)
}

// AccessLog returns nginx's access log.
func (n *Nginx) AccessLog() string {
	b, _ := os.ReadFile(filepath.Join(n.Dir, "access.log"))
	return string(b)
}

// startNginx writes the configuration around http(listen) and starts
// nginx on a free port, trying another port when the first was taken.
func startNginx(t testing.TB, bin, prefix string, http func(listen string) string, files map[string]string) *Nginx {
	t.Helper()
	dir := tempDir(t, prefix)
	for _, m := range []map[string]string{fastcgiFiles, files} {
		for name, text := range m {
			p := filepath.Join(dir, filepath.FromSlash(name))
			mkdir(t, filepath.Dir(p), 0o755)
			writeFile(t, p, text, 0o644)
		}
	}
	addr, p := onFreePort(t, "nginx", func(addr string) *proc {
		conf := fmt.Sprintf(`daemon off;
master_process on;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 256; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/body; proxy_temp_path %[1]s/proxy; fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi; scgi_temp_path %[1]s/scgi;
%[2]s
}
`, dir, http(addr))
		confPath := filepath.Join(dir, "nginx.conf")
		writeFile(t, confPath, conf, 0o644)
		errorLog := filepath.Join(dir, "error.log")
		if out, err := exec.Command(bin, "-t", "-q", "-p", dir, "-c", confPath, "-e", errorLog).CombinedOutput(); err != nil {
			t.Fatalf("sitetest: nginx -t: %v\n%s\n%s", err, out, numbered(conf))
		}
		cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", errorLog)
		return start(t, "nginx", cmd, dir, errorLog, filepath.Join(dir, "access.log"))
	})
	return &Nginx{Addr: addr, URL: "http://" + addr, Dir: dir, proc: p}
}

// onFreePort starts a server on a free loopback address and waits until
// it accepts connections, trying another address when the first was taken
// before the server bound it.
func onFreePort(t testing.TB, name string, run func(addr string) *proc) (string, *proc) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		addr := freeAddr(t)
		p := run(addr)
		err := p.dial("tcp", addr)
		if err == nil {
			return addr, p
		}
		taken := strings.Contains(p.logs(), "Address already in use")
		p.stop()
		if !taken || attempt == 3 {
			t.Fatalf("sitetest: %s did not start: %v\n%s", name, err, p.logs())
		}
	}
}

// proc is a server process started by this package: its own process
// group, stopped by its PID.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	logs func() string
}

// start starts cmd (output into dir/<name>.out), stops it when the test
// ends and shows out and the log files when the test failed.
func start(t testing.TB, name string, cmd *exec.Cmd, dir string, logFiles ...string) *proc {
	t.Helper()
	outPath := filepath.Join(dir, name+".out")
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	// Its own group (workers included), and SIGTERM if the test binary
	// dies: the master then takes its workers down with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		t.Fatalf("sitetest: start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	files := append([]string{outPath}, logFiles...)
	p.logs = func() string {
		var b strings.Builder
		for _, f := range files {
			text, err := os.ReadFile(f)
			if err != nil || len(bytes.TrimSpace(text)) == 0 {
				continue
			}
			if len(text) > 8000 {
				text = text[len(text)-8000:]
			}
			fmt.Fprintf(&b, "--- %s\n%s\n", f, text)
		}
		return b.String()
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sitetest: %s logs:\n%s", name, p.logs())
		}
		p.stop()
	})
	return p
}

// stop ends the process: SIGTERM (nginx and php-fpm stop their workers at
// once), then SIGKILL to its group after 5s.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-p.done
	}
}

// dial waits until addr accepts a connection, the process exits, or 10s
// pass.
func (p *proc) dial(network, addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited during start-up", p.name)
		default:
		}
		c, err := net.DialTimeout(network, addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not accepting on %s after 10s: %v", p.name, addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *proc) waitDial(t testing.TB, network, addr string) {
	t.Helper()
	if err := p.dial(network, addr); err != nil {
		t.Fatalf("sitetest: %v\n%s", err, p.logs())
	}
}

// need finds a binary with find, or skips the test (fails it under CI).
func need(t testing.TB, what string, find func() (string, error)) string {
	t.Helper()
	p, err := find()
	if err == nil {
		return p
	}
	testenv.Missing(t, fmt.Sprintf("sitetest: %s not found (%v)", what, err), "Debian: apt-get install nginx php-fpm php-cli apache2 libapache2-mod-php")
	return ""
}

// lookup finds name on PATH, else the newest match of the globs.
func lookup(name string, globs ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, g := range globs {
		m, _ := filepath.Glob(g)
		sort.Sort(sort.Reverse(sort.StringSlice(m)))
		for _, p := range m {
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("no %s on PATH or in %s", name, strings.Join(globs, ", "))
}

func findNginx() (string, error) { return lookup("nginx", "/usr/sbin/nginx") }

// findPHP returns php-fpm's path, or else php-cgi's (the other ""), or
// skips. SITETEST_PHP=php-fpm or php-cgi insists on one.
func findPHP(t testing.TB) (fpm, cgi string) {
	t.Helper()
	findFPM := func() (string, error) {
		return lookup("php-fpm", "/usr/sbin/php-fpm[0-9]*", "/usr/local/sbin/php-fpm")
	}
	findCGI := func() (string, error) { return lookup("php-cgi", "/usr/bin/php-cgi[0-9]*") }
	switch os.Getenv("SITETEST_PHP") {
	case "php-fpm":
		return need(t, "php-fpm", findFPM), ""
	case "php-cgi":
		return "", need(t, "php-cgi", findCGI)
	}
	if p, err := findFPM(); err == nil {
		return p, ""
	}
	return "", need(t, "php-fpm or php-cgi", func() (string, error) {
		if p, err := findCGI(); err == nil {
			return p, nil
		}
		return "", errors.New("neither php-fpm nor php-cgi on PATH, in /usr/sbin or /usr/bin")
	})
}

// unprivileged names the user and group PHP workers run as under root.
func unprivileged(t testing.TB) (string, string) {
	t.Helper()
	for _, name := range []string{"www-data", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		if g, err := user.LookupGroupId(u.Gid); err == nil {
			return u.Username, g.Name
		}
	}
	t.Fatal("sitetest: running as root and no www-data or nobody user for the PHP workers")
	return "", ""
}

// tempDir makes a directory every worker user can traverse (t.TempDir's
// parents are 0700), removed when the test ends.
func tempDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mkdir(t testing.TB, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func writeFile(t testing.TB, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func numbered(text string) string {
	var b strings.Builder
	for i, l := range strings.Split(text, "\n") {
		fmt.Fprintf(&b, "%3d  %s\n", i+1, l)
	}
	return b.String()
}
