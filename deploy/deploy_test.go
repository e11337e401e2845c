// Package deploy_test checks the deployment files offline: the hookonce
// configs they carry are valid, the nginx, systemd and compose settings
// agree with hookonce's, and the tools that can validate a file without a
// container engine or a running init (docker-compose config, nginx -t,
// systemd-analyze verify) accept them. Where nginx exists, it also runs the
// snippet in front of hookonce and probes through it.
package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe/sqlite"
	"github.com/hookonce/hookonce/probe"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// serveDrainDefault is serve's --drain-timeout default (cmd_serve.go).
const serveDrainDefault = 30 * time.Second

// needTool returns the tool's path, skipping the test when it is missing
// (failing instead when failInCI and CI=true).
func needTool(t *testing.T, name string, failInCI bool) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if failInCI && os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing under CI", name)
		}
		t.Skipf("%s is not installed", name)
	}
	return p
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// configMapConfig returns the hookonce.yaml inside the Kubernetes ConfigMap.
func configMapConfig(t *testing.T) []byte {
	t.Helper()
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(readFile(t, "kubernetes/configmap.yaml"), &cm); err != nil {
		t.Fatal(err)
	}
	cfg, ok := cm.Data["hookonce.yaml"]
	if !ok {
		t.Fatal("configmap.yaml has no hookonce.yaml")
	}
	return []byte(cfg)
}

func parseConfig(t *testing.T, name string, data []byte) *contract.Contract {
	t.Helper()
	// The ConfigMap's stripe sender reads its secret from the environment,
	// as the Deployment passes it from the Secret.
	t.Setenv("STRIPE_WEBHOOK_SECRET", "whsec_test")
	c, err := contract.Parse(data, name)
	if err != nil {
		t.Fatalf("%s is not a valid hookonce config:\n%v", name, err)
	}
	return c
}

// bitrixDispatcher is the one URL a 1C-Bitrix shop's payment providers notify.
const bitrixDispatcher = "/bitrix/tools/sale_ps_result.php"

func TestShippedConfigsAreValid(t *testing.T) {
	// The Bitrix demo's senders read their secrets from the environment,
	// as deploy/demo/bitrix.sh exports them.
	for _, v := range []string{"ROBOKASSA_PASSWORD2", "TBANK_PASSWORD", "CLOUDPAYMENTS_API_SECRET", "RBS_CALLBACK_TOKEN", "BITRIX24_APP_TOKEN"} {
		t.Setenv(v, "demo-"+strings.ToLower(v))
	}
	cases := []struct {
		name    string
		data    func(t *testing.T) []byte
		senders []string // name=path
	}{
		{"compose/hookonce.yaml", func(t *testing.T) []byte { return readFile(t, "compose/hookonce.yaml") },
			[]string{"payments=/webhooks/payment"}},
		{"demo/hookonce.yaml", func(t *testing.T) []byte { return readFile(t, "demo/hookonce.yaml") },
			[]string{"payments=/webhooks/payment"}},
		{"demo/bitrix-hookonce.yaml", func(t *testing.T) []byte { return readFile(t, "demo/bitrix-hookonce.yaml") },
			[]string{"robokassa=" + bitrixDispatcher, "yookassa=" + bitrixDispatcher, "tbank=" + bitrixDispatcher,
				"cloudpayments=" + bitrixDispatcher, "rbs=" + bitrixDispatcher, "bitrix24=" + bitrixDispatcher}},
		{"kubernetes/configmap.yaml#hookonce.yaml", configMapConfig,
			[]string{"stripe=/bitrix/tools/stripe.php", "payments=/webhooks/payment"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := parseConfig(t, tc.name, tc.data(t))
			var got []string
			for _, s := range c.Senders {
				got = append(got, s.Name+"="+s.Path)
			}
			if !slices.Equal(got, tc.senders) {
				t.Errorf("senders = %v, want %v", got, tc.senders)
			}
			for _, w := range c.Warnings {
				t.Errorf("warning: %s", w)
			}
		})
	}
}

func TestComposeFile(t *testing.T) {
	var f struct {
		Services map[string]struct {
			Command     any               `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
			Ports       []string          `yaml:"ports"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(readFile(t, "compose/docker-compose.yml"), &f); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"hookonce", "postgres", "shop", "shop-bare"} {
		if _, ok := f.Services[name]; !ok {
			t.Fatalf("no service %q", name)
		}
	}
	t.Run("HookonceOnPostgres", func(t *testing.T) {
		if dsn := f.Services["hookonce"].Environment["HOOKONCE_STORE"]; !strings.HasPrefix(dsn, "postgres://") || !strings.Contains(dsn, "@postgres:5432/") {
			t.Errorf("HOOKONCE_STORE = %q, want the postgres service", dsn)
		}
	})
	t.Run("ShopIsTheDemoShop", func(t *testing.T) {
		for _, svc := range []string{"shop", "shop-bare"} {
			found := false
			for _, v := range f.Services[svc].Volumes {
				src, _, _ := strings.Cut(v, ":")
				if strings.HasSuffix(src, "shop.php") {
					found = true
					if _, err := os.Stat(filepath.Join("compose", src)); err != nil {
						t.Errorf("%s mounts %s: %v", svc, src, err)
					}
				}
			}
			if !found {
				t.Errorf("%s does not mount the demo shop", svc)
			}
		}
	})
	t.Run("PortsOnLoopback", func(t *testing.T) {
		for name, svc := range f.Services {
			for _, p := range svc.Ports {
				if !strings.HasPrefix(p, "127.0.0.1:") {
					t.Errorf("%s publishes %s beyond loopback", name, p)
				}
			}
		}
	})
	t.Run("DockerComposeConfig", func(t *testing.T) {
		dc := needTool(t, "docker-compose", true)
		out, err := exec.Command(dc, "-f", "compose/docker-compose.yml", "config", "-q").CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Fatalf("docker-compose config -q: %v\n%s", err, out)
		}
	})
}

// unit parses a systemd unit into "Section.Key" -> values.
func unit(t *testing.T, path string) map[string][]string {
	t.Helper()
	m := map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(readFile(t, path)), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: bad line %q", path, line)
			}
			m[section+"."+k] = append(m[section+"."+k], v)
		}
	}
	return m
}

func TestSystemdUnit(t *testing.T) {
	const path = "systemd/hookonce.service"
	u := unit(t, path)
	want := map[string]string{
		"Service.DynamicUser":             "yes",
		"Service.StateDirectory":          "hookonce",
		"Service.WorkingDirectory":        "/var/lib/hookonce",
		"Service.ProtectSystem":           "strict",
		"Service.ProtectHome":             "yes",
		"Service.NoNewPrivileges":         "yes",
		"Service.PrivateTmp":              "yes",
		"Service.CapabilityBoundingSet":   "",
		"Service.EnvironmentFile":         "-/etc/hookonce/env",
		"Service.ExecStart":               "/usr/local/bin/hookonce serve --config /etc/hookonce/hookonce.yaml",
		"Service.ExecReload":              "/bin/kill -HUP $MAINPID",
		"Service.KillSignal":              "SIGTERM",
		"Service.RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"Install.WantedBy":                "multi-user.target",
	}
	for k, v := range want {
		t.Run(k, func(t *testing.T) {
			if got := u[k]; len(got) != 1 || got[0] != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		})
	}
	t.Run("StoreInStateDirectory", func(t *testing.T) {
		if !slices.Contains(u["Service.Environment"], "HOOKONCE_STORE=sqlite:/var/lib/hookonce/hookonce.db") {
			t.Errorf("Environment = %q", u["Service.Environment"])
		}
	})
	t.Run("StopOutlastsDrain", func(t *testing.T) {
		v := u["Service.TimeoutStopSec"]
		d, err := time.ParseDuration(strings.Join(v, ""))
		if err != nil || d <= serveDrainDefault {
			t.Errorf("TimeoutStopSec = %q, want more than the %s drain", v, serveDrainDefault)
		}
	})
	t.Run("SystemdAnalyzeVerify", func(t *testing.T) {
		sa := needTool(t, "systemd-analyze", false)
		// verify checks that ExecStart exists: point it at any executable.
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		copyPath := filepath.Join(t.TempDir(), "hookonce.service")
		text := strings.Replace(string(readFile(t, path)), "ExecStart=/usr/local/bin/hookonce", "ExecStart="+self, 1)
		if err := os.WriteFile(copyPath, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		// Unknown keys and bad values are only warnings (exit 0): any output fails.
		out, err := exec.Command(sa, "verify", copyPath).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
		}
	})
}

var (
	reLocation  = regexp.MustCompile(`location = (\S+) \{\s*include /etc/nginx/hookonce-webhook\.conf;`)
	reDirective = func(name string) *regexp.Regexp { return regexp.MustCompile(`(?m)^\s*` + name + ` (\S+);`) }
)

func nginxDirective(t *testing.T, conf, name string) string {
	t.Helper()
	m := reDirective(name).FindStringSubmatch(conf)
	if m == nil {
		t.Fatalf("no %s in the nginx snippet", name)
	}
	return m[1]
}

func nginxSize(s string) int64 {
	n, _ := strconv.ParseInt(strings.TrimRight(s, "kKmM"), 10, 64)
	switch {
	case strings.HasSuffix(strings.ToLower(s), "m"):
		return n << 20
	case strings.HasSuffix(strings.ToLower(s), "k"):
		return n << 10
	}
	return n
}

func TestNginxMatchesHookonce(t *testing.T) {
	site := string(readFile(t, "nginx/hookonce.conf"))
	webhook := string(readFile(t, "nginx/hookonce-webhook.conf"))
	c := parseConfig(t, "configmap", configMapConfig(t))

	t.Run("WebhookPathsAreTheSenders", func(t *testing.T) {
		var locs, senders []string
		for _, m := range reLocation.FindAllStringSubmatch(site, -1) {
			locs = append(locs, m[1])
		}
		for _, s := range c.Senders {
			senders = append(senders, s.Path)
		}
		slices.Sort(locs)
		slices.Sort(senders)
		if !slices.Equal(locs, senders) {
			t.Errorf("nginx routes %v through hookonce, the senders match %v", locs, senders)
		}
	})
	t.Run("BodyLimit", func(t *testing.T) {
		if got := nginxSize(nginxDirective(t, webhook, "client_max_body_size")); got != c.MaxBody {
			t.Errorf("client_max_body_size = %d, hookonce max_body = %d", got, c.MaxBody)
		}
	})
	t.Run("ReadTimeoutOutlastsHookonce", func(t *testing.T) {
		rt, err := time.ParseDuration(nginxDirective(t, webhook, "proxy_read_timeout"))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range c.Senders {
			if rt <= s.UpstreamTimeout || rt <= s.WaitTimeout {
				t.Errorf("proxy_read_timeout %s <= sender %s's upstream_timeout %s / wait_timeout %s", rt, s.Name, s.UpstreamTimeout, s.WaitTimeout)
			}
		}
	})
	t.Run("NoRetries", func(t *testing.T) {
		if nginxDirective(t, webhook, "proxy_next_upstream") != "off" {
			t.Error("nginx may resend a delivery")
		}
	})
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestNginxInFrontOfHookonce runs the snippet for real (nginx -t, then
// nginx on loopback) with hookonce and two counting apps behind it: the
// webhook path must reach the app through hookonce and pass the probe,
// anything else must reach the app directly.
func TestNginxInFrontOfHookonce(t *testing.T) {
	ngx := needTool(t, "nginx", false)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // nginx workers run as nobody
		t.Fatal(err)
	}

	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "hookonce.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	viaHookonce := proxytest.NewUpstream(t, nil)
	direct := proxytest.NewUpstream(t, nil)
	// The compose rules: the ConfigMap's also has a signed stripe sender,
	// which the probe below does not sign for.
	ho := proxytest.Start(t, store, viaHookonce.URL, string(readFile(t, "compose/hookonce.yaml")))

	port := freePort(t)
	site := string(readFile(t, "nginx/hookonce.conf"))
	webhookConf, _ := filepath.Abs("nginx/hookonce-webhook.conf")
	repl := strings.NewReplacer(
		"/etc/nginx/hookonce-webhook.conf", webhookConf,
		"listen 80;", fmt.Sprintf("listen 127.0.0.1:%d;", port),
		"server 127.0.0.1:8080;", "server "+strings.TrimPrefix(ho.URL, "http://")+";",
		"server 127.0.0.1:8000;", "server "+strings.TrimPrefix(direct.URL, "http://")+";",
	)
	if err := os.WriteFile(filepath.Join(dir, "site.conf"), []byte(repl.Replace(site)), 0o644); err != nil {
		t.Fatal(err)
	}
	main := fmt.Sprintf(`pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
daemon off;
events {}
http {
  access_log off;
  client_body_temp_path %[1]s/body; proxy_temp_path %[1]s/proxy; fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi; scgi_temp_path %[1]s/scgi;
  include %[1]s/site.conf;
}
`, dir)
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(ngx, "-t", "-p", dir, "-c", conf).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	cmd := exec.Command(ngx, "-p", dir, "-c", conf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt) // SIGINT: fast shutdown of master and workers
		_ = cmd.Wait()
	})
	front := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitUp(t, front+"/", filepath.Join(dir, "error.log"))

	t.Run("OtherPathsSkipHookonce", func(t *testing.T) {
		before := viaHookonce.Total()
		resp, err := http.Get(front + "/catalog/item.php?id=7")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if direct.Executions("") == 0 || viaHookonce.Total() != before {
			t.Errorf("direct app calls %d, via hookonce %d; want the page straight from the app", direct.Executions(""), viaHookonce.Total()-before)
		}
	})
	t.Run("ProbeThroughNginx", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := probe.Run(ctx, probe.Config{Target: front, Path: "/webhooks/payment", Sender: "payments", Parallel: 6})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		res.Print(&b)
		t.Logf("probe through nginx:\n%s", b.String())
		if !res.Passed() {
			t.Fatal("probe failed through nginx")
		}
		for _, k := range res.Keys {
			if n := viaHookonce.Executions(k); n != 1 {
				t.Errorf("%s ran %d times at the app", k, n)
			}
			if direct.Executions(k) != 0 {
				t.Errorf("%s reached the app without hookonce", k)
			}
			if ip := viaHookonce.LastHeader(k).Get("X-Real-Ip"); ip != "127.0.0.1" {
				t.Errorf("X-Real-IP at the app = %q, want the sender's address", ip)
			}
		}
	})
}

func waitUp(t *testing.T, url, errorLog string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(errorLog)
			t.Fatalf("nginx did not come up: %v\n%s", errors.Unwrap(err), log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
