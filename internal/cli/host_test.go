package cli

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An installed host (the packages, the systemd unit): the operator's
// commands find the config, the environment file, the store and the
// admin listener there when nothing names them, so they work as pasted.

const hostSecret = "s3cret-from-the-env-file"

// This package's tests never read the machine's own installation (the
// deploy tests install one while others run): host points nowhere unless
// a test sets it with fakeHost.
func init() {
	host = hostLayout{Config: "/nonexistent/hookonce-test/hookonce.yaml", EnvFile: "/nonexistent/hookonce-test/env",
		Store: "sqlite:/nonexistent/hookonce-test/hookonce.db", AdminListen: "127.0.0.1:1", AdminToken: "/nonexistent/hookonce-test/admin-token"}
}

// hostConfigYAML names one sender whose secret only the environment file
// holds.
const hostConfigYAML = `upstream: "http://127.0.0.1:8000"
senders:
  - name: shop
    match: { path: /hook }
    key: [ { header: X-Event-Id } ]
    signature: { scheme: hmac-sha256, header: X-Signature, secret_env: HOST_TEST_SECRET }
`

// fakeHost points host at a temporary directory with the config and env
// file given ("" for none), runs the test in an empty working directory,
// and undoes what loading the env file set.
func fakeHost(t *testing.T, config, env string) hostLayout {
	t.Helper()
	dir := t.TempDir()
	h := hostLayout{
		Config:      filepath.Join(dir, "etc", "hookonce.yaml"),
		EnvFile:     filepath.Join(dir, "etc", "env"),
		Store:       "sqlite:" + filepath.Join(dir, "lib", "hookonce.db"),
		AdminListen: "127.0.0.1:1",
		AdminToken:  filepath.Join(dir, "etc", "admin-token"), // made by a test that wants one
	}
	for _, d := range []string{"etc", "lib"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, h.Config, config)
	write(t, h.EnvFile, env)
	old := host
	host = h
	t.Cleanup(func() { host = old })
	t.Chdir(t.TempDir())
	for _, k := range []string{"HOST_TEST_SECRET", "HOOKONCE_STORE", "HOOKONCE_CONFIG", "HOOKONCE_ENV_FILE", "HOOKONCE_ADMIN_LISTEN", "HOOKONCE_ADMIN_TOKEN", "HOOKONCE_ADMIN_TOKEN_FILE"} {
		if v, ok := os.LookupEnv(k); ok {
			t.Cleanup(func() { os.Setenv(k, v) })
		} else {
			t.Cleanup(func() { os.Unsetenv(k) })
		}
		os.Unsetenv(k)
	}
	return h
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if data == "" {
		return
	}
	if err := os.WriteFile(path, []byte(data), 0o640); err != nil {
		t.Fatal(err)
	}
}

func TestHostLayoutFoundAsPasted(t *testing.T) {
	h := fakeHost(t, hostConfigYAML, "# secrets\nHOST_TEST_SECRET="+hostSecret+"\n")
	out, errOut, code := hookonce(t, "check")
	if code != exitOK || out != h.Config+": ok, 1 sender(s): shop\n" {
		t.Fatalf("check: exit %d, %q %q", code, out, errOut)
	}
	if out, errOut, code = hookonce(t, "migrate"); code != exitOK {
		t.Fatalf("migrate: exit %d %s %s", code, out, errOut)
	}
	if _, err := os.Stat(strings.TrimPrefix(h.Store, "sqlite:")); err != nil {
		t.Fatalf("migrate made no store at the host's %s: %v", h.Store, err)
	}
	if _, err := os.Stat("hookonce.db"); err == nil {
		t.Fatal("migrate made ./hookonce.db on a host with its own store")
	}
	if out, errOut, code = hookonce(t, "list", "--status", "unretried", "--sender", "shop"); code != exitOK || !strings.HasPrefix(out, "SENDER") {
		t.Fatalf("list: exit %d %q %s", code, out, errOut)
	}
	// lookup reads the host's store: "no record", not "no database".
	if _, errOut, code = hookonce(t, "lookup", "shop", "k1"); code != exitNotFound {
		t.Fatalf("lookup: exit %d %s", code, errOut)
	}
}

func TestHostEnvFileSetsTheStore(t *testing.T) {
	other := filepath.Join(t.TempDir(), "other.db")
	fakeHost(t, hostConfigYAML, "HOST_TEST_SECRET='"+hostSecret+"'\nexport HOOKONCE_STORE=\"sqlite:"+other+"\"\n")
	if out, errOut, code := hookonce(t, "migrate"); code != exitOK || !strings.Contains(out, other) {
		t.Fatalf("migrate: exit %d %q %s", code, out, errOut)
	}
	// The command's own environment wins over the file.
	mine := filepath.Join(t.TempDir(), "mine.db")
	t.Setenv("HOOKONCE_STORE", "sqlite:"+mine)
	if out, errOut, code := hookonce(t, "migrate"); code != exitOK || !strings.Contains(out, mine) {
		t.Fatalf("migrate with HOOKONCE_STORE set: exit %d %q %s", code, out, errOut)
	}
	// And --store over both.
	flag := filepath.Join(t.TempDir(), "flag.db")
	if out, errOut, code := hookonce(t, "migrate", "--store", "sqlite:"+flag); code != exitOK || !strings.Contains(out, flag) {
		t.Fatalf("migrate --store: exit %d %q %s", code, out, errOut)
	}
}

// A hookonce.yaml in the working directory comes before the host's, and
// then neither the host's env file nor its store is used.
func TestLocalConfigFirst(t *testing.T) {
	fakeHost(t, hostConfigYAML, "HOST_TEST_SECRET="+hostSecret+"\n")
	write(t, localConfig, hostConfigYAML)
	_, errOut, code := hookonce(t, "check")
	if code != exitUsage || !strings.Contains(errOut, "hookonce.yaml") || !strings.Contains(errOut, "HOST_TEST_SECRET is not set") {
		t.Fatalf("check with ./hookonce.yaml: exit %d %s", code, errOut)
	}
	if out, errOut, code := hookonce(t, "migrate"); code != exitOK || !strings.Contains(out, "sqlite:hookonce.db") {
		t.Fatalf("migrate: exit %d %q %s", code, out, errOut)
	}
	// HOOKONCE_ENV_FILE names an env file for any config.
	t.Setenv("HOOKONCE_ENV_FILE", host.EnvFile)
	if out, errOut, code := hookonce(t, "check"); code != exitOK || out != "hookonce.yaml: ok, 1 sender(s): shop\n" {
		t.Fatalf("check with HOOKONCE_ENV_FILE: exit %d %q %s", code, out, errOut)
	}
	t.Setenv("HOOKONCE_ENV_FILE", filepath.Join(t.TempDir(), "missing"))
	if _, errOut, code := hookonce(t, "check"); code != exitUsage || !strings.Contains(errOut, "environment file") {
		t.Fatalf("check with a missing HOOKONCE_ENV_FILE: exit %d %s", code, errOut)
	}
}

// A line the env file cannot hold is named by its number; its value,
// which may be a secret, is never printed.
func TestHostEnvFileBadLine(t *testing.T) {
	h := fakeHost(t, hostConfigYAML, "HOST_TEST_SECRET="+hostSecret+"\nnot a line "+hostSecret+"\n")
	out, errOut, code := hookonce(t, "check")
	if code != exitUsage || !strings.Contains(errOut, h.EnvFile+":2: want NAME=value") {
		t.Fatalf("check: exit %d %q %s", code, out, errOut)
	}
	if strings.Contains(out+errOut, hostSecret) {
		t.Fatal("the error quotes the env file's secret")
	}
}

// health and redeliver reach the host's admin listener, not 9090.
func TestHostAdminListener(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	fakeHost(t, hostConfigYAML, "HOST_TEST_SECRET="+hostSecret+"\n")
	host.AdminListen = strings.TrimPrefix(srv.URL, "http://")
	if _, errOut, code := hookonce(t, "health"); code != exitOK {
		t.Fatalf("health on the host's admin listener: exit %d %s", code, errOut)
	}
	// The env file's listener wins; 0.0.0.0 is reached on loopback.
	_, port, _ := strings.Cut(host.AdminListen, ":")
	write(t, host.EnvFile, "HOST_TEST_SECRET=x\nHOOKONCE_ADMIN_LISTEN=0.0.0.0:"+port+"\n")
	host.AdminListen = "127.0.0.1:1"
	if _, errOut, code := hookonce(t, "health"); code != exitOK {
		t.Fatalf("health on the env file's admin listener: exit %d %s", code, errOut)
	}
}

// The packaged host's admin token (/etc/hookonce/admin-token, made at
// install, given to serve by the unit): the operator's commands that call
// the admin API find it and send it with no flag, against a real serve
// whose admin listener refuses a request without it.
func TestHostAdminToken(t *testing.T) {
	h := fakeHost(t, hostConfigYAML, "HOST_TEST_SECRET="+hostSecret+"\n")
	const token = "tok-made-at-install"
	if err := os.WriteFile(h.AdminToken, []byte(token+"\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOST_TEST_SECRET", hostSecret) // serve's own environment, as the unit's env file gives it
	s := startServe(t, "--config", h.Config, "--store", h.Store, "--admin-token-file", h.AdminToken)
	addr := s.AdminAddr
	host.AdminListen = addr

	resp, err := http.Get("http://" + addr + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/events without the token: %d, want 401", resp.StatusCode)
	}

	// As pasted on the host: the listener and the token found, no flags.
	if out, errOut, code := hookonce(t, "redeliver", "--status", "unretried"); code != exitOK || out != "no unretried events\n" {
		t.Fatalf("redeliver --status unretried with the host's token: exit %d %q %s", code, out, errOut)
	}
	if out, errOut, code := hookonce(t, "accept", "shop", "k1"); code == exitOK || strings.Contains(out+errOut, "Unauthorized") {
		t.Errorf("accept with the host's token: exit %d %q %s; want a refusal of the key, not of the caller", code, out, errOut)
	}
	// Flags win over the file.
	if _, errOut, code := hookonce(t, "redeliver", "--admin-token", "flag-token", "--status", "unretried"); code != exitRuntime || !strings.Contains(errOut, "Unauthorized") {
		t.Errorf("redeliver --admin-token flag-token: exit %d %s, want 401 from serve", code, errOut)
	}

	// Another config than the host's: the host's token is not sent.
	t.Run("LocalConfig", func(t *testing.T) {
		t.Chdir(t.TempDir())
		write(t, localConfig, hostConfigYAML)
		_, errOut, code := hookonce(t, "redeliver", "--admin", "http://"+addr, "--status", "unretried")
		if code != exitRuntime || !strings.Contains(errOut, "Unauthorized") {
			t.Errorf("redeliver with ./hookonce.yaml: exit %d %s, want 401 (no token sent)", code, errOut)
		}
	})

	// A host without the file (the hand-installed unit) has no token: the
	// command asks without one, and this serve refuses it.
	if err := os.Remove(h.AdminToken); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := hookonce(t, "redeliver", "--status", "unretried"); code != exitRuntime || !strings.Contains(errOut, "Unauthorized") {
		t.Errorf("redeliver without the token file: exit %d %s, want 401 from serve", code, errOut)
	}

	// A file that is there but cannot be read is an error, not "no token".
	unreadable := []struct {
		name, want string
		make       func()
	}{
		{"Directory", "admin token file", func() { _ = os.Mkdir(h.AdminToken, 0o750) }},
		{"Empty", "is empty", func() { _ = os.WriteFile(h.AdminToken, nil, 0o640) }},
	}
	if os.Geteuid() != 0 {
		unreadable = append(unreadable, struct {
			name, want string
			make       func()
		}{"NoPermission", "run the command as root", func() { _ = os.WriteFile(h.AdminToken, []byte(token), 0o000) }})
	}
	for _, u := range unreadable {
		t.Run(u.name, func(t *testing.T) {
			u.make()
			defer os.RemoveAll(h.AdminToken)
			_, errOut, code := hookonce(t, "redeliver", "--status", "unretried")
			if code != exitUsage || !strings.Contains(errOut, u.want) || strings.Contains(errOut, "Unauthorized") {
				t.Errorf("redeliver with the token file %s: exit %d %s, want a usage error saying %q", u.name, code, errOut, u.want)
			}
		})
	}

	// The env file's HOOKONCE_ADMIN_TOKEN wins over the host's file.
	if err := os.WriteFile(h.AdminToken, []byte(token), 0o640); err != nil {
		t.Fatal(err)
	}
	write(t, h.EnvFile, "HOST_TEST_SECRET="+hostSecret+"\nHOOKONCE_ADMIN_TOKEN=from-env-file\n")
	if _, errOut, code := hookonce(t, "redeliver", "--status", "unretried"); code != exitRuntime || !strings.Contains(errOut, "Unauthorized") {
		t.Errorf("redeliver with HOOKONCE_ADMIN_TOKEN in the env file: exit %d %s, want 401 (the env file's token sent)", code, errOut)
	}
}

// probe --admin takes the admin token as redeliver finds it: on the host,
// the host's file (here one that cannot be read, refused before any
// delivery is sent).
func TestProbeFindsHostAdminToken(t *testing.T) {
	h := fakeHost(t, hostConfigYAML, "HOST_TEST_SECRET="+hostSecret+"\n")
	if err := os.Mkdir(h.AdminToken, 0o750); err != nil {
		t.Fatal(err)
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("probe sent %s %s before it had the admin token", r.Method, r.URL)
	}))
	defer site.Close()
	_, errOut, code := hookonce(t, "probe", "--target", site.URL+"/hook", "--sender", "shop", "--admin", site.URL)
	if code != exitUsage || !strings.Contains(errOut, "admin token file "+h.AdminToken) {
		t.Errorf("probe --admin with an unreadable host token file: exit %d %s", code, errOut)
	}
}
