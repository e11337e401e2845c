package tests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hookonce/hookonce/internal/testkit/servetest"
	"github.com/hookonce/hookonce/internal/testkit/testenv"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// dockerfile returns the Dockerfile's instructions, continuation lines joined.
func dockerfile(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\"))
			continue
		}
		cur.WriteString(line)
		out = append(out, cur.String())
		cur.Reset()
	}
	return out
}

// The Dockerfile cannot be built here (no container engine); these are the
// facts about it that can be checked without one.
func TestDockerfileInstructions(t *testing.T) {
	lines := dockerfile(t)
	all := strings.Join(lines, "\n")
	cases := []struct {
		name string
		re   string
	}{
		{"BuilderIsGo126", `(?m)^FROM golang:1\.26 AS build$`},
		{"RuntimeIsDistrolessNonroot", `(?m)^FROM gcr\.io/distroless/static-debian12:nonroot$`},
		{"StaticBuild", `(?m)^RUN CGO_ENABLED=0 go build -trimpath .*-ldflags "-s -w -X main\.version=\$\{VERSION\}"`},
		{"NonRootUser", `(?m)^USER 65532:65532$`},
		{"Ports", `(?m)^EXPOSE 8080 9090$`},
		{"StateVolume", `(?m)^VOLUME \["/var/lib/hookonce"\]$`},
		{"StateWorkdir", `(?m)^WORKDIR /var/lib/hookonce$`},
		{"SQLiteInVolume", `HOOKONCE_STORE="sqlite:/var/lib/hookonce/hookonce\.db"`},
		{"HealthcheckWithoutShell", `(?m)^HEALTHCHECK .*CMD \["/hookonce", "health"`},
		{"Entrypoint", `(?m)^ENTRYPOINT \["/hookonce"\]$`},
		{"Cmd", `(?m)^CMD \["serve"\]$`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !regexp.MustCompile(tc.re).MatchString(all) {
				t.Errorf("Dockerfile lacks %s", tc.re)
			}
		})
	}
	if last := lines[len(lines)-1]; last != `CMD ["serve"]` {
		t.Errorf("last instruction = %q", last)
	}
}

// buildLikeDockerfile runs the Dockerfile's own go build line on this
// machine and returns the binary.
func buildLikeDockerfile(t *testing.T, version string) string {
	t.Helper()
	var build string
	for _, l := range dockerfile(t) {
		if strings.HasPrefix(l, "RUN CGO_ENABLED=0 go build") {
			build = strings.TrimPrefix(l, "RUN ")
		}
	}
	build, _, _ = strings.Cut(build, "&&")
	if build == "" {
		t.Fatal("no go build line in the Dockerfile")
	}
	bin := filepath.Join(t.TempDir(), "hookonce")
	build = strings.ReplaceAll(build, "${VERSION}", version)
	build = strings.ReplaceAll(build, "-o /out/hookonce", "-o "+bin)
	cmd := exec.Command("sh", "-c", build)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, out)
	}
	return bin
}

func runBin(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return string(out), 0
}

func TestBinaryBuiltLikeTheDockerfile(t *testing.T) {
	bin := buildLikeDockerfile(t, "v9.9.9-test")

	t.Run("Static", func(t *testing.T) {
		testenv.LookPath(t, "apt-get install file", "file")
		out, err := exec.Command("file", "-L", bin).CombinedOutput()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "statically linked") || strings.Contains(string(out), "interpreter") {
			t.Errorf("file: %s; want a statically linked executable (distroless/static has no libc)", out)
		}
		if ldd, err := exec.LookPath("ldd"); err == nil {
			out, err := exec.Command(ldd, bin).CombinedOutput()
			if err == nil && !strings.Contains(string(out), "not a dynamic executable") && !strings.Contains(string(out), "statically linked") {
				t.Errorf("ldd lists libraries: %s", out)
			}
		}
	})

	t.Run("VersionFromLdflags", func(t *testing.T) {
		out, code := runBin(t, bin, "version")
		if code != 0 || strings.TrimSpace(out) != "hookonce v9.9.9-test" {
			t.Errorf("version: %q exit %d", out, code)
		}
	})

	t.Run("Health", func(t *testing.T) {
		ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/healthz" {
				http.NotFound(w, r)
			}
		}))
		t.Cleanup(ok.Close)
		down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "draining", http.StatusServiceUnavailable)
		}))
		t.Cleanup(down.Close)
		closed := httptest.NewServer(http.NotFoundHandler())
		closed.Close()
		cases := []struct {
			name string
			url  string
			want int
		}{
			{"200", ok.URL + "/healthz", 0},
			{"404", ok.URL + "/nope", 1},
			{"503", down.URL + "/healthz", 1},
			{"Refused", closed.URL + "/healthz", 1},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				out, code := runBin(t, bin, "health", "--url", tc.url, "--timeout", "5s")
				if code != tc.want {
					t.Errorf("health %s: exit %d, want %d (%s)", tc.url, code, tc.want, out)
				}
			})
		}
	})

	t.Run("Probe", func(t *testing.T) {
		store := servetest.OpenStore(t, "sqlite:"+filepath.Join(t.TempDir(), "hookonce.db"))
		site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(50 * time.Millisecond)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(time.Now().Format(time.RFC3339Nano)))
		})
		px := proxytest.Start(t, store, site.URL, proxytest.AcceptanceConfig)
		u, _ := url.Parse(site.URL)
		plain := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) }})
		t.Cleanup(plain.Close)

		cases := []struct {
			name     string
			target   string
			want     int
			wantFail bool
		}{
			{"Hookonce", px.URL, 0, false},
			{"PlainProxy", plain.URL, 1, true},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				out, code := runBin(t, bin, "probe", "--target", tc.target, "--path", "/hooks/shop", "--sender", "shop", "--parallel", "5")
				t.Logf("hookonce probe against %s:\n%s", tc.name, out)
				if code != tc.want {
					t.Errorf("exit %d, want %d", code, tc.want)
				}
				if strings.Contains(out, "FAIL") != tc.wantFail || !strings.Contains(out, "CHECK") {
					t.Errorf("table FAIL rows = %v, want %v", strings.Contains(out, "FAIL"), tc.wantFail)
				}
			})
		}
	})
	t.Run("CheckDeployConfigs", func(t *testing.T) {
		cm := filepath.Join(t.TempDir(), "configmap-hookonce.yaml")
		if err := os.WriteFile(cm, configMapData(t), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, cfg := range []string{"deploy/compose/hookonce.yaml", "deploy/demo/hookonce.yaml", cm} {
			cmd := exec.Command(bin, "check", "--config", cfg)
			cmd.Env = append(os.Environ(), "STRIPE_WEBHOOK_SECRET=whsec_test")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("check --config %s: %v\n%s", cfg, err, out)
			}
		}
	})

	t.Run("ServeThenProbeWithAdmin", func(t *testing.T) {
		var mu sync.Mutex
		var seen []string // event ids in the order the site first saw them
		site := proxytest.NewSite(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			id := proxytest.EventID(r, body)
			mu.Lock()
			if !slices.Contains(seen, id) {
				seen = append(seen, id)
			}
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"order":"created","event":%q,"at":%d}`, id, time.Now().UnixNano())
		})
		dir := t.TempDir()
		serve := servetest.Start(t, servetest.Options{Bin: bin, Args: []string{"--upstream", site.URL,
			"--config", "deploy/compose/hookonce.yaml", "--store", "sqlite:" + filepath.Join(dir, "hookonce.db"),
			"--admin-token", "probe-token", "--drain-timeout", "2s"}})
		listen, admin := serve.Addr, serve.AdminAddr
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, code := runBin(t, bin, "health", "--url", "http://"+admin+"/readyz", "--timeout", "1s"); code == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("serve did not become ready:\n%s", serve.Stderr())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if out, code := runBin(t, bin, "health", "--url", "http://"+admin+"/healthz"); code != 0 {
			t.Errorf("health against serve: exit %d %s", code, out)
		}

		out, code := runBin(t, bin, "probe", "--target", "http://"+listen, "--path", "/webhooks/payment",
			"--sender", "payments", "--admin", "http://"+admin, "--admin-token", "probe-token", "--parallel", "8")
		t.Logf("hookonce probe --admin against hookonce serve:\n%s", out)
		if code != 0 || !strings.Contains(out, "12 checks, 0 failed") {
			t.Errorf("probe: exit %d, want 0 and 12 passing checks", code)
		}
		mu.Lock()
		keys := slices.Clone(seen)
		mu.Unlock()
		if len(keys) != 2 || !strings.HasSuffix(keys[0], "-new") || !strings.HasSuffix(keys[1], "-parallel") {
			t.Errorf("the site saw event ids %v, want the probe's new and parallel events", keys)
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, "hookonce-probe-") {
				t.Errorf("event id %q lacks the probe prefix", k)
			}
			if n := site.Executions(k); n != 1 {
				t.Errorf("%s executed %d times at the site", k, n)
			}
		}
		// The probe released its events: nothing left in the store.
		if out, code := runBin(t, bin, "list", "--store", "sqlite:"+filepath.Join(dir, "hookonce.db"), "--json", "--sender", "payments"); code != 0 || strings.Contains(out, "hookonce-probe-") {
			t.Errorf("list after the probe: exit %d\n%s", code, out)
		}

		serve.Terminate(t)
	})
}

// configMapData is the hookonce.yaml inside the Kubernetes ConfigMap.
func configMapData(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("deploy/kubernetes/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(data, &cm); err != nil || cm.Data["hookonce.yaml"] == "" {
		t.Fatalf("configmap.yaml: no data.hookonce.yaml (%v)", err)
	}
	return []byte(cm.Data["hookonce.yaml"])
}
