// Package deploy_test checks the deployment files offline: the hookonce
// configs they carry are valid, the nginx, systemd and compose settings
// agree with hookonce's, and the tools that can validate a file without a
// container engine or a running init (docker-compose config, nginx -t,
// systemd-analyze verify) accept them. Where nginx and PHP exist, it runs a
// shop through the nginx files for real (site_test.go): front nginx,
// hookonce, nginx + php-fpm, and Apache with mod_php where installed,
// counting script runs at PHP.
package deploy_test

import (
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
	"github.com/hookonce/hookonce/internal/testkit/testenv"
)

// serveDrainDefault is serve's --drain-timeout default (internal/cli/serve.go).
const serveDrainDefault = 30 * time.Second

// needTool returns the tool's path, skipping the test when it is missing
// (failing instead when failInCI and CI=true).
func needTool(t *testing.T, name string, failInCI bool) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if failInCI {
			testenv.Missing(t, name+" is not installed", ".ci/run installs it")
		}
		t.Skipf("%s is not installed (optional: this test is skipped under CI too)", name)
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
			[]string{"payments=/webhooks/payment", "orders=/webhooks/order", "orders-serialized=/webhooks/order-serialized"}},
		{"demo/bitrix-hookonce.yaml", func(t *testing.T) []byte { return readFile(t, "demo/bitrix-hookonce.yaml") },
			[]string{"robokassa=" + bitrixDispatcher, "yookassa=" + bitrixDispatcher, "tbank=" + bitrixDispatcher,
				"cloudpayments=" + bitrixDispatcher, "rbs=" + bitrixDispatcher, "bitrix24=" + bitrixDispatcher}},
		{"kubernetes/configmap.yaml#hookonce.yaml", configMapConfig,
			[]string{"stripe=/bitrix/tools/stripe.php", "payments=/webhooks/payment"}},
		// The packages' /etc/hookonce/hookonce.yaml: the README's quick
		// start (tests/docs_test.go keeps the three one file).
		{"packages/hookonce.yaml", func(t *testing.T) []byte { return readFile(t, "packages/hookonce.yaml") },
			[]string{"robokassa=" + bitrixDispatcher, "tbank=" + bitrixDispatcher}},
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
	t.Run("ReloadChecksFirst", func(t *testing.T) {
		// systemd runs ExecReload lines in order and stops at the first
		// that fails: a refused file fails `systemctl reload` with check's
		// message, and no SIGHUP is sent.
		want := []string{"+/usr/local/bin/hookonce check --config /etc/hookonce/hookonce.yaml", "/bin/kill -HUP $MAINPID"}
		if got := u["Service.ExecReload"]; !slices.Equal(got, want) {
			t.Errorf("ExecReload = %q, want %q", got, want)
		}
	})
	t.Run("AdminListenerNotPrometheusPort", func(t *testing.T) {
		if !slices.Contains(u["Service.Environment"], "HOOKONCE_ADMIN_LISTEN=127.0.0.1:8081") {
			t.Errorf("Environment = %q, want the admin listener on 127.0.0.1:8081 (9090 is Prometheus's)", u["Service.Environment"])
		}
	})
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
	t.Run("MemoryAboveBodyBudget", func(t *testing.T) {
		// What requests may hold with the defaults (docs/configuration.md,
		// "Memory is bounded"), and room for the process besides.
		const budget = contract.DefaultMaxInflight * (contract.DefaultMaxBody + contract.DefaultMaxStoredBody)
		const room = 128 << 20
		max, err := unitBytes(strings.Join(u["Service.MemoryMax"], ""))
		if err != nil || max < budget+room {
			t.Errorf("MemoryMax = %q (%v), want at least %d MiB: the body budget %d MiB and %d MiB for the process",
				u["Service.MemoryMax"], err, (budget+room)>>20, budget>>20, room>>20)
		}
		var limit int64 = -1
		for _, e := range u["Service.Environment"] {
			if v, ok := strings.CutPrefix(e, "GOMEMLIMIT="); ok {
				if n, ok := strings.CutSuffix(v, "MiB"); ok {
					if m, err := strconv.ParseInt(n, 10, 64); err == nil {
						limit = m << 20
					}
				}
			}
		}
		// Go's soft limit: under the ceiling (the kernel's), over the budget
		// (else the collector would run without end under a full budget).
		if limit < budget || limit >= max {
			t.Errorf("GOMEMLIMIT = %d bytes (Environment %q), want NNNMiB between the body budget (%d) and MemoryMax (%d)",
				limit, u["Service.Environment"], budget, max)
		}
	})
	t.Run("SystemdAnalyzeVerify", func(t *testing.T) {
		systemdAnalyzeVerify(t, path, "/usr/local/bin/hookonce")
	})
}

// unitBytes reads a systemd size as MemoryMax= takes it: bytes, or with
// K, M, G (1024-based).
func unitBytes(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult = 1 << 10
	case strings.HasSuffix(s, "M"):
		mult = 1 << 20
	case strings.HasSuffix(s, "G"):
		mult = 1 << 30
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mult, err
}

var reDirective = func(name string) *regexp.Regexp { return regexp.MustCompile(`(?m)^\s*` + name + ` (\S+);`) }

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

// TestNginxMatchesHookonce checks the nginx files against hookonce's rules
// and against the holes they close; site_test.go runs them.
func TestNginxMatchesHookonce(t *testing.T) {
	site := string(readFile(t, "nginx/hookonce.conf"))
	webhook := string(readFile(t, "nginx/hookonce-webhook.conf"))
	backend := string(readFile(t, "nginx/hookonce-site.conf"))
	// The Bitrix shop's config the front is written for (the README's
	// quick start, the packages' /etc/hookonce/hookonce.yaml).
	t.Setenv("ROBOKASSA_PASSWORD2", "change-me")
	t.Setenv("TBANK_PASSWORD", "change-me")
	c := parseConfig(t, "hookonce.example.yaml", readFile(t, "../hookonce.example.yaml"))

	t.Run("WebhookPathsAreTheSenders", func(t *testing.T) {
		var locs, senders []string
		for _, m := range reWebhookLocation.FindAllStringSubmatch(site, -1) {
			path := strings.ReplaceAll(m[1], `\.`, ".")
			locs = append(locs, path)
			// One form for every path: a regex on the script name that also
			// takes PATH_INFO (the form site_test.go runs).
			if m[0] != webhookLocation(path) {
				t.Errorf("location for %s is\n%s\nwant\n%s", path, m[0], webhookLocation(path))
			}
		}
		for _, s := range c.Senders {
			senders = append(senders, s.Path)
		}
		slices.Sort(locs)
		slices.Sort(senders)
		senders = slices.Compact(senders)
		if !slices.Equal(locs, senders) {
			t.Errorf("nginx routes %v through hookonce, the senders match %v", locs, senders)
		}
	})
	t.Run("WebhookLocationsComeFirst", func(t *testing.T) {
		// nginx takes the first regex location that matches: the shop's
		// `\.php` location must not see a webhook script first.
		hooks := reWebhookLocation.FindAllStringIndex(site, -1)
		lastHook := hooks[len(hooks)-1][1]
		for _, m := range regexp.MustCompile(`location ~\*? \S+`).FindAllStringIndex(site, -1) {
			if hook := reWebhookLocation.FindStringIndex(site[m[0]:]); m[0] < lastHook && (hook == nil || hook[0] != 0) {
				t.Errorf("%s comes before a webhook location", site[m[0]:m[1]])
			}
		}
	})
	t.Run("MergeSlashes", func(t *testing.T) {
		if nginxDirective(t, site, "merge_slashes") != "on" {
			t.Error("merge_slashes is not on: //bitrix/tools/sale_ps_result.php would miss the webhook location")
		}
	})
	t.Run("NormalisedPathPassedEscaped", func(t *testing.T) {
		if !strings.Contains(webhook, "\nrewrite ^ $uri break;\nproxy_pass http://hookonce;\n") {
			t.Error("the webhook location does not pass nginx's $uri, re-escaped, to hookonce")
		}
		if m := regexp.MustCompile(`(?m)^\s*proxy_pass \S*\$`).FindString(webhook); m != "" {
			t.Errorf("%q puts a decoded variable into the request line", strings.TrimSpace(m))
		}
	})
	t.Run("AddressFromTheConnection", func(t *testing.T) {
		for _, h := range []string{"X-Real-IP", "X-Forwarded-For"} {
			if got := nginxDirective(t, webhook, "proxy_set_header "+h); got != "$remote_addr" {
				t.Errorf("%s = %s, want $remote_addr", h, got)
			}
		}
	})
	t.Run("BodyLimit", func(t *testing.T) {
		for name, conf := range map[string]string{"hookonce-webhook.conf": webhook, "hookonce-site.conf": backend} {
			if got := nginxSize(nginxDirective(t, conf, "client_max_body_size")); got != c.MaxBody {
				t.Errorf("%s: client_max_body_size = %d, hookonce max_body = %d", name, got, c.MaxBody)
			}
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
	t.Run("SiteServer", func(t *testing.T) {
		if !regexp.MustCompile(`(?m)^\s*listen 127\.0\.0\.1:8000[ ;]`).MatchString(backend) {
			t.Error("the site server does not listen on hookonce's --upstream, 127.0.0.1:8000, loopback only")
		}
		if !strings.Contains(site, "--upstream http://127.0.0.1:8000") {
			t.Error("hookonce.conf does not point hookonce's --upstream at the site server")
		}
		if nginxDirective(t, backend, "set_real_ip_from") != "127.0.0.1" || nginxDirective(t, backend, "real_ip_header") != "X-Real-IP" {
			t.Error("the site server does not take REMOTE_ADDR from hookonce's X-Real-IP")
		}
		if strings.Contains(backend, "include hookonce-webhook.conf") || strings.Contains(backend, "proxy_pass") {
			t.Error("the site server sends requests on instead of running PHP")
		}
		if !strings.Contains(site, "`trusted_proxies: [127.0.0.1]`") {
			t.Error("hookonce.conf does not tell the operator to trust nginx (else hookonce replaces its X-Real-IP)")
		}
	})
}

// systemdAnalyzeVerify runs systemd-analyze verify on a copy of the unit
// at path whose ExecStart (the binary execStart) points at this test
// binary: verify checks that ExecStart exists. Unknown keys and bad
// values are only warnings (exit 0), so any output fails.
func systemdAnalyzeVerify(t *testing.T, path, execStart string) {
	t.Helper()
	sa := needTool(t, "systemd-analyze", false)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	text := string(readFile(t, path))
	if !strings.Contains(text, "ExecStart="+execStart) {
		t.Fatalf("%s: no ExecStart=%s", path, execStart)
	}
	copyPath := filepath.Join(t.TempDir(), "hookonce.service")
	// ExecReload runs the same binary (hookonce check): it must exist too.
	if err := os.WriteFile(copyPath, []byte(strings.ReplaceAll(text, execStart+" ", self+" ")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", copyPath).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
