// Package validate checks the Kubernetes manifests in deploy/kubernetes
// offline: each is decoded strictly (unknown or misspelled fields fail) into
// the k8s.io/api type of its kind, and the cross-references between them are
// checked. It lives in its own module so hookonce gets no k8s dependencies.
// A schema validator that downloads schemas (kubeconform) cannot run here;
// these types are the schemas' source.
package validate_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

const dir = ".."

// decode strictly unmarshals one manifest into the type its kind names.
func decode(data []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, err
	}
	var obj any
	switch tm.APIVersion + "/" + tm.Kind {
	case "apps/v1/Deployment":
		obj = &appsv1.Deployment{}
	case "v1/Service":
		obj = &corev1.Service{}
	case "v1/ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1/Secret":
		obj = &corev1.Secret{}
	default:
		return nil, fmt.Errorf("unexpected kind %s %s", tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

type manifests struct {
	deploy *appsv1.Deployment
	svc    *corev1.Service
	cm     *corev1.ConfigMap
	secret *corev1.Secret
}

func load(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	var m manifests
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "\n---") {
			t.Fatalf("%s: one object per file, please", f)
		}
		obj, err := decode(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			m.deploy = o
		case *corev1.Service:
			m.svc = o
		case *corev1.ConfigMap:
			m.cm = o
		case *corev1.Secret:
			m.secret = o
		}
	}
	if m.deploy == nil || m.svc == nil || m.cm == nil || m.secret == nil {
		t.Fatalf("want a Deployment, Service, ConfigMap and Secret in %v", files)
	}
	return m
}

func TestStrictDecodingCatchesMistakes(t *testing.T) {
	cases := []struct {
		name string
		yaml string
	}{
		{"UnknownField", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {selektor: {a: b}}\n"},
		{"WrongType", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: {port: 80}}\n"},
		{"BadQuantity", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      containers:\n        - name: a\n          resources: {requests: {cpu: lots}}\n"},
		{"DuplicateKey", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\ndata: {c: d}\n"},
		{"UnknownKind", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decode([]byte(tc.yaml)); err == nil {
				t.Fatalf("decoded without error:\n%s", tc.yaml)
			}
		})
	}
}

func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("deployment %s has no container %q", d.Name, name)
	return corev1.Container{}
}

func portNumber(c corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return 0
}

func TestManifests(t *testing.T) {
	m := load(t)
	spec := m.deploy.Spec.Template.Spec
	ho := container(t, m.deploy, "hookonce")
	site := container(t, m.deploy, "site")

	t.Run("SelectorMatchesPods", func(t *testing.T) {
		sel, err := metav1.LabelSelectorAsSelector(m.deploy.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if !sel.Matches(labelSet(m.deploy.Spec.Template.Labels)) {
			t.Errorf("deployment selector %v does not match its pods %v", m.deploy.Spec.Selector, m.deploy.Spec.Template.Labels)
		}
		for k, v := range m.svc.Spec.Selector {
			if m.deploy.Spec.Template.Labels[k] != v {
				t.Errorf("service selector %s=%s does not match the pods", k, v)
			}
		}
	})

	t.Run("ServiceTargetsHookonceOnly", func(t *testing.T) {
		for _, p := range m.svc.Spec.Ports {
			if got := portNumber(ho, p.TargetPort); got != 8080 {
				t.Errorf("service port %s targets %v (hookonce port %d), want hookonce's 8080", p.Name, p.TargetPort.String(), got)
			}
			if portNumber(site, p.TargetPort) != 0 {
				t.Errorf("service port %s can reach the site directly", p.Name)
			}
		}
	})

	t.Run("ProbesOnAdminPort", func(t *testing.T) {
		for name, p := range map[string]*corev1.Probe{"liveness": ho.LivenessProbe, "readiness": ho.ReadinessProbe} {
			want := map[string]string{"liveness": "/healthz", "readiness": "/readyz"}[name]
			if p == nil || p.HTTPGet == nil {
				t.Errorf("%s probe missing or not HTTP", name)
				continue
			}
			if p.HTTPGet.Path != want || portNumber(ho, p.HTTPGet.Port) != 9090 {
				t.Errorf("%s probe = %s on %s, want %s on the admin port 9090", name, p.HTTPGet.Path, p.HTTPGet.Port.String(), want)
			}
		}
		if env(ho, "HOOKONCE_ADMIN_LISTEN") != ":9090" {
			t.Error("the admin listener must bind the pod address for the kubelet's probes")
		}
		if ref := envRef(ho, "HOOKONCE_ADMIN_TOKEN"); ref == nil {
			t.Error("a non-loopback admin listener needs HOOKONCE_ADMIN_TOKEN from the Secret")
		}
	})

	t.Run("ResourcesSet", func(t *testing.T) {
		for _, c := range spec.Containers {
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("container %s: want cpu and memory requests and a memory limit, got %v", c.Name, c.Resources)
			}
		}
	})

	t.Run("MemoryAboveBodyBudget", func(t *testing.T) {
		// hookonce's defaults (contract.DefaultMaxInflight × (DefaultMaxBody
		// + DefaultMaxStoredBody), docs/configuration.md "Memory is
		// bounded"): this module does not import hookonce's, so the sum is
		// written out; the systemd unit's test computes it from contract.
		const budget = 256 * (1<<20 + 256<<10)
		const room = 128 << 20
		limit := ho.Resources.Limits.Memory().Value()
		if limit < budget+room {
			t.Errorf("hookonce memory limit %d MiB, want at least %d MiB: the body budget %d MiB and %d MiB for the process",
				limit>>20, (budget+room)>>20, budget>>20, room>>20)
		}
		q, err := resource.ParseQuantity(strings.TrimSuffix(env(ho, "GOMEMLIMIT"), "B"))
		if err != nil {
			t.Fatalf("GOMEMLIMIT = %q: %v", env(ho, "GOMEMLIMIT"), err)
		}
		soft := q.Value()
		if soft < budget || soft >= limit {
			t.Errorf("GOMEMLIMIT = %q, want between the body budget (%d MiB) and the limit (%d MiB)", env(ho, "GOMEMLIMIT"), budget>>20, limit>>20)
		}
	})

	t.Run("HookonceRunsAsNonRoot", func(t *testing.T) {
		sc := ho.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("hookonce securityContext = %+v", sc)
		}
	})

	t.Run("UpstreamIsTheSiteContainer", func(t *testing.T) {
		want := fmt.Sprintf("--upstream=http://127.0.0.1:%d", site.Ports[0].ContainerPort)
		if !contains(ho.Args, want) || ho.Args[0] != "serve" {
			t.Errorf("hookonce args = %v, want serve … %s", ho.Args, want)
		}
	})

	t.Run("ConfigMapMounted", func(t *testing.T) {
		if _, ok := m.cm.Data["hookonce.yaml"]; !ok {
			t.Fatal("ConfigMap has no hookonce.yaml")
		}
		var vol string
		for _, v := range spec.Volumes {
			if v.ConfigMap != nil && v.ConfigMap.Name == m.cm.Name {
				vol = v.Name
			}
		}
		mounted := ""
		for _, vm := range ho.VolumeMounts {
			if vm.Name == vol {
				mounted = vm.MountPath
			}
		}
		if vol == "" || !contains(ho.Args, "--config="+mounted+"/hookonce.yaml") {
			t.Errorf("ConfigMap %s mounted at %q; hookonce args %v", m.cm.Name, mounted, ho.Args)
		}
	})

	t.Run("SecretRefsExist", func(t *testing.T) {
		for _, c := range spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					continue
				}
				ref := e.ValueFrom.SecretKeyRef
				_, inData := m.secret.Data[ref.Key]
				_, inString := m.secret.StringData[ref.Key]
				if ref.Name != m.secret.Name || (!inData && !inString) {
					t.Errorf("container %s env %s refers to secret %s key %s, which secret.yaml lacks", c.Name, e.Name, ref.Name, ref.Key)
				}
			}
		}
	})

	t.Run("GraceExceedsDrain", func(t *testing.T) {
		// serve --drain-timeout defaults to 30s.
		if g := spec.TerminationGracePeriodSeconds; g == nil || *g <= 30 {
			t.Errorf("terminationGracePeriodSeconds = %v, want more than the 30s drain", g)
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func env(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func envRef(c corev1.Container, name string) *corev1.EnvVarSource {
	for _, e := range c.Env {
		if e.Name == name {
			return e.ValueFrom
		}
	}
	return nil
}

type labelSet map[string]string

func (l labelSet) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string            { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }
