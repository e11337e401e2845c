package tests

// The alert rules (deploy/prometheus/alerts.yml) and the Grafana dashboard
// (deploy/grafana/hookonce.json): promtool checks and unit-tests the rules,
// every dashboard expression must parse, and every metric either names must
// be one that hookonce's /metrics can carry (exportedSeries).

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe/readiness"
	"github.com/hookonce/hookonce/internal/testkit/servetest"
	"github.com/hookonce/hookonce/internal/testkit/testenv"
	"github.com/hookonce/hookonce/proxy"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

const (
	alertsFile     = "deploy/prometheus/alerts.yml"
	alertTestsFile = "deploy/prometheus/alerts_test.yml"
	dashboardFile  = "deploy/grafana/hookonce.json"
	goldenMetrics  = "proxy/testdata/metrics/decisions.txt"
)

// notExported are the series the rules and the dashboard may name that
// hookonce does not export: up is Prometheus's own, per scrape target.
var notExported = []string{"up"}

// comingMetrics are named by the rules and the dashboard ahead of the code
// that exports them (none now): each with its type. Until it lands a name
// here counts as exported; once it is exported, its type must match, and
// the entry can go.
var comingMetrics = map[string]dto.MetricType{}

// serveMetrics are the hookonce_* metrics `serve` registers itself, beside
// what proxy.New registers (internal/cli/serve.go).
var serveMetrics = map[string]dto.MetricType{
	"hookonce_build_info":                                   dto.MetricType_GAUGE,
	"hookonce_config_last_reload_successful":                dto.MetricType_GAUGE,
	"hookonce_config_last_reload_success_timestamp_seconds": dto.MetricType_GAUGE,
	"hookonce_sender_ready":                                 dto.MetricType_GAUGE,
	"hookonce_notify_failures_total":                        dto.MetricType_COUNTER, // with a notify: block
}

// comingAnchors are the docs sections the alerts link to that are being
// written on another branch (docs/troubleshooting.md, one section per
// status a provider sees). Once the page exists, its headings decide.
var comingAnchors = map[string][]string{
	"docs/troubleshooting.md": {"401", "403", "422", "503"},
}

// needPromtool returns promtool's path; without it the test skips, except
// under CI (.ci/run installs Debian's prometheus package, which ships it).
func needPromtool(t *testing.T) string {
	t.Helper()
	return testenv.LookPath(t, "apt-get install prometheus", "promtool")
}

func promtool(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			AlertName string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// readYAML decodes path into v; strict refuses fields v does not have.
func readYAML(t *testing.T, path string, v any, strict bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(strict)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestAlertRulesPromtool runs promtool check rules on alerts.yml and its
// unit tests (promtool test rules alerts_test.yml).
func TestAlertRulesPromtool(t *testing.T) {
	bin := needPromtool(t)
	if out, err := promtool(t, bin, "check", "rules", alertsFile); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", alertsFile, err, out)
	}
	if out, err := promtool(t, bin, "test", "rules", alertTestsFile); err != nil {
		t.Fatalf("promtool test rules %s: %v\n%s", alertTestsFile, err, out)
	}
}

// TestEveryAlertIsTested: each alert has a unit test where it fires and one
// where it does not, a severity, and a summary that names a command to run.
func TestEveryAlertIsTested(t *testing.T) {
	var rules ruleFile
	readYAML(t, alertsFile, &rules, true)
	var tests ruleTests
	readYAML(t, alertTestsFile, &tests, false)
	if !slices.Contains(tests.RuleFiles, filepath.Base(alertsFile)) {
		t.Fatalf("%s does not load %s", alertTestsFile, alertsFile)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	var alerts []string
	command := regexp.MustCompile("`[a-z]+ [^`]+`")
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts = append(alerts, r.Alert)
			if !fires[r.Alert] {
				t.Errorf("alert %s has no test where it fires", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("alert %s has no test where it stays quiet", r.Alert)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, s)
			}
			if !command.MatchString(r.Annotations["summary"]) {
				t.Errorf("alert %s: the summary names no command to run (`…`): %q", r.Alert, r.Annotations["summary"])
			}
			if strings.Contains(r.Annotations["summary"], "--store") {
				t.Errorf("alert %s: on a packaged host the commands find their store: no --store in %q", r.Alert, r.Annotations["summary"])
			}
			if targets := docsLink.FindAllStringSubmatch(r.Annotations["description"], -1); len(targets) == 0 {
				t.Errorf("alert %s: the description links no docs section (Docs: docs/PAGE.md#SECTION): %q", r.Alert, r.Annotations["description"])
			} else {
				for _, m := range targets {
					checkDocsSection(t, r.Alert, m[1], m[2])
				}
			}
		}
	}
	for name := range fires {
		if !slices.Contains(alerts, name) {
			t.Errorf("%s tests alert %s, which %s does not have", alertTestsFile, name, alertsFile)
		}
	}
	// The list, so that none is dropped unnoticed.
	for _, want := range []string{"HookonceDown", "HookonceUnretriedEvents", "HookonceStoreErrors", "HookonceConflicts",
		"HookonceNotSuccess", "HookonceSiteFailures", "HookonceOverloaded",
		"HookonceRefused", "HookonceUnmatchedRefused", "HookonceUnmatchedForwarded", "HookonceStoreFailing",
		"HookonceConfigReloadFailed", "HookonceDeliveriesWaiting"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("%s has no alert %s", alertsFile, want)
		}
	}
}

// docsLink is a docs section an alert's description names: "Docs:
// docs/PAGE.md#SECTION" (several for a template that picks one).
var docsLink = regexp.MustCompile(`(docs/[a-z-]+\.md)#([a-z0-9-]+)`)

// checkDocsSection fails unless page has a heading whose anchor is
// section, or, while page does not exist yet, section is a coming one.
func checkDocsSection(t *testing.T, alert, page, section string) {
	t.Helper()
	b, err := os.ReadFile(page)
	if os.IsNotExist(err) && slices.Contains(comingAnchors[page], section) {
		return
	}
	if err != nil {
		t.Errorf("alert %s links %s#%s: %v", alert, page, section, err)
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") && anchor(strings.TrimLeft(line, "#")) == section {
			return
		}
	}
	t.Errorf("alert %s links %s#%s: %s has no such heading", alert, page, section, page)
}

type dashboard struct {
	Panels     []json.RawMessage `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type dashExpr struct {
	where, expr string
}

func readDashboard(t *testing.T) (dashboard, []dashExpr) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	// Every "expr", wherever it sits (panels, rows' panels, …).
	var all any
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	var exprs []dashExpr
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if s, ok := v[k].(string); ok && k == "expr" {
					where := path
					if title, ok := v["refId"].(string); ok {
						where += " refId " + title
					}
					exprs = append(exprs, dashExpr{where, s})
					continue
				}
				walk(path+"."+k, v[k])
			}
		case []any:
			for i, e := range v {
				p := fmt.Sprintf("%s[%d]", path, i)
				if m, ok := e.(map[string]any); ok {
					if title, ok := m["title"].(string); ok {
						p = fmt.Sprintf("%s (%q)", p, title)
					}
				}
				walk(p, e)
			}
		}
	}
	walk("", all)
	if len(exprs) == 0 {
		t.Fatalf("%s: no expr found", dashboardFile)
	}
	return d, exprs
}

var (
	grafanaVar  = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]`)
	labelValues = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)
)

// concrete replaces Grafana's variables by values Prometheus accepts: the
// built-in intervals by durations, the dashboard's own variables by a name.
func concrete(t *testing.T, d dashboard, expr string) string {
	t.Helper()
	builtin := map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h", "__range_s": "3600", "__interval_ms": "60000"}
	return grafanaVar.ReplaceAllStringFunc(expr, func(m string) string {
		sm := grafanaVar.FindStringSubmatch(m)
		name := sm[1] + sm[2] + sm[3]
		if v, ok := builtin[name]; ok {
			return v
		}
		for _, v := range d.Templating.List {
			if v.Name == name {
				return "shop"
			}
		}
		t.Errorf("%s: %q uses $%s, which is neither Grafana's nor a dashboard variable", dashboardFile, expr, name)
		return m
	})
}

// dashboardQueries returns every PromQL expression of the dashboard with its
// variables made concrete, and the selectors of its label_values queries.
func dashboardQueries(t *testing.T) map[string]string {
	d, exprs := readDashboard(t)
	out := map[string]string{}
	for _, e := range exprs {
		out[e.where] = concrete(t, d, e.expr)
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		sm := labelValues.FindStringSubmatch(strings.TrimSpace(q))
		if sm == nil {
			t.Errorf("%s: variable %s: query %q is not label_values(selector, label)", dashboardFile, v.Name, q)
			continue
		}
		out["variable "+v.Name] = concrete(t, d, sm[1])
	}
	return out
}

// TestDashboardExpressionsParse hands every expression of the dashboard to
// promtool as a recording rule of a throwaway rule file (promtool query
// needs a server; check rules parses offline).
func TestDashboardExpressionsParse(t *testing.T) {
	bin := needPromtool(t)
	queries := dashboardQueries(t)
	check := func(exprs map[string]string) (string, error) {
		type rule struct {
			Record string `yaml:"record"`
			Expr   string `yaml:"expr"`
		}
		var rules []rule
		var names []string
		for where := range exprs {
			names = append(names, where)
		}
		sort.Strings(names)
		for i, where := range names {
			rules = append(rules, rule{fmt.Sprintf("dashboard:expr_%d", i), exprs[where]})
			t.Logf("dashboard:expr_%d is %s: %s", i, where, exprs[where])
		}
		b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "dashboard.rules.yml")
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return promtool(t, bin, "check", "rules", f)
	}
	// The check must be able to fail.
	if out, err := check(map[string]string{"broken": `sum(rate(hookonce_requests_total[5m])`}); err == nil {
		t.Fatalf("promtool accepted an unbalanced expression:\n%s", out)
	}
	if out, err := check(queries); err != nil {
		t.Fatalf("promtool check rules on the dashboard's %d expressions: %v\n%s", len(queries), err, out)
	}
}

// TestDashboardPanels: the panels the on-call person looks at are there,
// each with a Prometheus data source and a place on the grid.
func TestDashboardPanels(t *testing.T) {
	d, _ := readDashboard(t)
	ids := map[float64]bool{}
	var all []string
	var topStats []string // titles of the stat panels on the first row
	for i, raw := range d.Panels {
		var p struct {
			ID         float64 `json:"id"`
			Type       string  `json:"type"`
			Title      string  `json:"title"`
			Datasource struct {
				Type, UID string
			} `json:"datasource"`
			GridPos struct{ H, W, X, Y int } `json:"gridPos"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatalf("panel %d: %v", i, err)
		}
		if p.Title == "" || p.ID == 0 || ids[p.ID] || p.GridPos.H == 0 || p.GridPos.W == 0 {
			t.Errorf("panel %d (%q): needs a title, a unique id and a gridPos", i, p.Title)
		}
		ids[p.ID] = true
		if p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the $datasource variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			all = append(all, tg.Expr)
		}
		if p.Type == "stat" && p.GridPos.Y == 0 {
			topStats = append(topStats, p.Title)
		}
	}
	// The first row answers "is everything fine?" at a glance.
	for _, want := range []string{"Deliveries (24h)", "Done (24h)", "Refused (24h)", "Conflicts (24h)", "Site failures (24h)", "Version"} {
		if !slices.Contains(topStats, want) {
			t.Errorf("the top row has no stat panel %q (it has %q)", want, topStats)
		}
	}
	joined := strings.Join(all, "\n")
	for _, want := range []string{
		`sum by (sender, outcome) (rate(hookonce_requests_total`, // requests by outcome per sender
		`outcome=~"duplicate`, `outcome=~"conflict`, `outcome=~"not_success"`, `outcome=~"released"`,
		"hookonce_unretried_events", "hookonce_upstream_duration_seconds_bucket", "hookonce_store_duration_seconds_bucket",
		"hookonce_build_info", `rejected_signature|missing_key|too_large|bad_request`, "hookonce_unmatched_total",
		"hookonce_pending_deliveries", "hookonce_oldest_pending_seconds",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("no panel queries %s", want)
		}
	}
	// A shop with a few deliveries an hour sees counts, not rates rounded
	// to nothing: these are counted per interval.
	for _, outcome := range []string{"conflict", "not_success", "released", "rejected_signature"} {
		re := regexp.MustCompile(`increase\(hookonce_requests_total\{[^}]*outcome=~"[^"]*` + outcome + `[^}]*\}\[\$__interval\]\)`)
		if !re.MatchString(joined) {
			t.Errorf("no panel counts %s per interval (increase over $__interval)", outcome)
		}
	}
}

// TestMonitoringNamesOnlyExportedMetrics: every metric the alert rules and
// the dashboard name is one hookonce's /metrics carries (or up).
func TestMonitoringNamesOnlyExportedMetrics(t *testing.T) {
	exported := exportedSeries(t)
	for n, mt := range comingMetrics {
		if got, ok := exported[n]; ok {
			if got != mt {
				t.Errorf("%s is exported as a %s, but the rules expect a %s", n, got, mt)
			}
			t.Logf("%s is exported now: remove it from comingMetrics", n)
			continue
		}
		exported[n] = mt
	}
	var rules ruleFile
	readYAML(t, alertsFile, &rules, true)
	recorded := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	check := func(t *testing.T, where, expr string, recorded map[string]bool) {
		names, err := metricNames(expr)
		if err != nil {
			t.Errorf("%s: %v: %s", where, err, expr)
			return
		}
		if len(names) == 0 {
			t.Errorf("%s names no metric: %s", where, expr)
		}
		for _, n := range names {
			if _, ok := exported[n]; !ok && !slices.Contains(notExported, n) && !recorded[n] {
				t.Errorf("%s names %s, which hookonce does not export: %s", where, n, expr)
			}
		}
	}
	t.Run("alerts", func(t *testing.T) {
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				check(t, r.Alert+r.Record, r.Expr, recorded)
			}
		}
	})
	t.Run("dashboard", func(t *testing.T) {
		// The dashboard works without the rules loaded: no recorded names.
		for where, q := range dashboardQueries(t) {
			check(t, where, q, nil)
		}
	})
}

// exportedSeries returns the name of every series hookonce's admin
// /metrics can carry: histograms as _bucket, _sum and _count.
//
// A vector appears in a scrape only once it has a child, so a scrape alone
// misses the metrics of events that did not happen. Two sources together:
//   - a real `hookonce serve` (the built binary) after one delivery,
//     scraped as Prometheus would: the runtime and process collectors and
//     whatever else serve registers, with their types;
//   - every collector proxy.New registers, read from its descriptors
//     (Describe) whether or not it has observed anything, its type from the
//     collector's Go type.
//
// Both must agree on hookonce_* families, and the golden metrics file's
// families must be among them, so a metric added, renamed or registered
// elsewhere shows up here.
func exportedSeries(t *testing.T) map[string]dto.MetricType {
	t.Helper()
	families := map[string]dto.MetricType{}

	// 1. What a scrape of the running binary carries.
	dir := t.TempDir()
	body := scrapeServe(t)
	scraped := parseMetrics(t, "/metrics", body)
	for n, mt := range scraped {
		families[n] = mt
	}
	if _, ok := scraped["hookonce_requests_total"]; !ok {
		t.Fatalf("the scrape has no hookonce_requests_total after a delivery:\n%s", body)
	}

	// 2. Everything the proxy registers, observed or not.
	reg := &describing{Registerer: prometheus.NewRegistry(), t: t, kinds: map[string]dto.MetricType{}}
	c, err := contract.Parse([]byte(e2eConfig), "e2e.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := proxy.New(proxy.Options{Upstream: &url.URL{Scheme: "http", Host: "127.0.0.1:1"}, Contract: c,
		Store: servetest.OpenStore(t, "sqlite:"+filepath.Join(dir, "described.db")), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(t.Context())
	if len(reg.kinds) == 0 {
		t.Fatal("proxy.New registered no metrics")
	}
	// serve registers the readiness gauge beside the proxy's metrics.
	readiness.NewGauge(reg)
	for n, mt := range reg.kinds {
		if !strings.HasPrefix(n, "hookonce_") {
			t.Errorf("the proxy registers %s: hookonce's metrics are hookonce_*", n)
		}
		if got, ok := families[n]; ok && got != mt {
			t.Errorf("%s is a %s in the scrape and a %s in the proxy's descriptors", n, got, mt)
		}
		families[n] = mt
	}
	for n, mt := range scraped {
		if _, ok := reg.kinds[n]; strings.HasPrefix(n, "hookonce_") && !ok {
			if want, ok := serveMetrics[n]; !ok || want != mt {
				t.Errorf("serve exports %s (%s), which proxy.New does not register: teach exportedSeries (serveMetrics) where it comes from", n, mt)
			}
		}
	}
	if _, ok := scraped["hookonce_build_info"]; !ok {
		t.Errorf("the scrape has no hookonce_build_info:\n%s", body)
	}

	// The golden file's families are exported, with the same type.
	b, err := os.ReadFile(goldenMetrics)
	if err != nil {
		t.Fatal(err)
	}
	for n, mt := range parseMetrics(t, goldenMetrics, string(b)) {
		if got, ok := families[n]; !ok || got != mt {
			t.Errorf("%s has %s (%s), exported as %v", goldenMetrics, n, mt, got)
		}
	}

	series := map[string]dto.MetricType{}
	for n, mt := range families {
		switch mt {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			series[n+"_bucket"], series[n+"_sum"], series[n+"_count"] = mt, mt, mt
		case dto.MetricType_SUMMARY:
			series[n], series[n+"_sum"], series[n+"_count"] = mt, mt, mt
		default:
			series[n] = mt
		}
	}
	return series
}

// scrapeServe runs the built binary's serve (e2eConfig, SQLite), sends it
// one delivery and returns its admin listener's /metrics.
func scrapeServe(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookonce.yaml")
	writeFile(t, cfg, e2eConfig)
	site := proxytest.NewSite(t, nil)
	s := startServe(t, "--upstream", site.URL, "--config", cfg, "--store", "sqlite:"+filepath.Join(dir, "h.db"))
	admin := s.Admin
	proxytest.Post(t, s.URL+"/hooks/shop", `{"id":"metrics-1"}`)
	status, body := httpGet(t, admin+"/metrics", "")
	s.Terminate(t)
	if status != 200 {
		t.Fatalf("GET /metrics: %d %s", status, body)
	}
	return body
}

func parseMetrics(t *testing.T, where, text string) map[string]dto.MetricType {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	out := map[string]dto.MetricType{}
	for n, mf := range mfs {
		out[n] = mf.GetType()
	}
	return out
}

// describing is a Registerer that notes the name and type of every metric
// a collector describes, then registers it.
type describing struct {
	prometheus.Registerer
	t     *testing.T
	kinds map[string]dto.MetricType
}

var descName = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*")`)

func (d *describing) Register(c prometheus.Collector) error {
	var kind dto.MetricType
	switch c := c.(type) {
	case *prometheus.HistogramVec:
		kind = dto.MetricType_HISTOGRAM
	case *prometheus.SummaryVec:
		kind = dto.MetricType_SUMMARY
	case *prometheus.CounterVec:
		kind = dto.MetricType_COUNTER
	case *prometheus.GaugeVec:
		kind = dto.MetricType_GAUGE
	case prometheus.Metric:
		var m dto.Metric
		if err := c.Write(&m); err != nil {
			d.t.Fatal(err)
		}
		switch {
		case m.Histogram != nil:
			kind = dto.MetricType_HISTOGRAM
		case m.Summary != nil:
			kind = dto.MetricType_SUMMARY
		case m.Counter != nil:
			kind = dto.MetricType_COUNTER
		case m.Gauge != nil:
			kind = dto.MetricType_GAUGE
		default:
			d.t.Fatalf("collector %T: unknown metric type", c)
		}
	default:
		d.t.Fatalf("the proxy registers a %T: teach exportedSeries its type", c)
	}
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		m := descName.FindStringSubmatch(desc.String())
		if m == nil {
			d.t.Fatalf("cannot read the name of %s", desc)
		}
		name, err := strconv.Unquote(m[1])
		if err != nil {
			d.t.Fatal(err)
		}
		d.kinds[name] = kind
	}
	return d.Registerer.Register(c)
}

func (d *describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

// PromQL words that are not metric names. Aggregations count as keywords
// whether or not "(" follows them (sum by (x) (…)).
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true, "Inf": true, "NaN": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
}

// metricNames returns the metric names a PromQL expression selects: the
// identifiers left once strings, label matchers, ranges, numbers, function
// calls, keywords and grouping label lists are skipped. A selector by
// __name__ is refused (the check could not see it).
func metricNames(expr string) ([]string, error) {
	var names []string
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
	}
	skipString := func(i int) (int, error) { // s[i] is the quote
		q := expr[i]
		for j := i + 1; j < len(expr); j++ {
			if expr[j] == '\\' && q != '`' {
				j++
			} else if expr[j] == q {
				return j + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated string at %d", i)
	}
	// skipTo returns the index past the close matching the open at i,
	// strings skipped.
	skipTo := func(i int, open, close byte) (int, string, error) {
		depth := 0
		for j := i; j < len(expr); {
			switch expr[j] {
			case '"', '\'', '`':
				k, err := skipString(j)
				if err != nil {
					return 0, "", err
				}
				j = k
				continue
			case open:
				depth++
			case close:
				depth--
				if depth == 0 {
					return j + 1, expr[i : j+1], nil
				}
			}
			j++
		}
		return 0, "", fmt.Errorf("unbalanced %c at %d", open, i)
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j, err := skipString(i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '{':
			j, inner, err := skipTo(i, '{', '}')
			if err != nil {
				return nil, err
			}
			if strings.Contains(inner, "__name__") {
				return nil, fmt.Errorf("a selector by __name__: %s", inner)
			}
			i = j
		case c == '[':
			j, _, err := skipTo(i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++
			}
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && (expr[k] == ' ' || expr[k] == '\t' || expr[k] == '\n') {
				k++
			}
			switch {
			case k < len(expr) && expr[k] == '(' &&
				(word == "by" || word == "without" || word == "on" || word == "ignoring" || word == "group_left" || word == "group_right"):
				end, _, err := skipTo(k, '(', ')') // a list of labels
				if err != nil {
					return nil, err
				}
				j = end
			case k < len(expr) && expr[k] == '(', promqlKeywords[word]: // a function or a keyword
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
			}
			i = j
		default:
			i++
		}
	}
	return names, nil
}

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
		err  bool
	}{
		{`up{job="hookonce"} == 0`, []string{"up"}, false},
		{`max by (sender) (hookonce_unretried_events) > 0`, []string{"hookonce_unretried_events"}, false},
		{`sum by (sender) (rate(a_total{outcome=~"x|y", sender!="by"}[5m])) / sum without (instance) (rate(b_total[5m] offset 1h)) > 0.05 and c >= 3`,
			[]string{"a_total", "b_total", "c"}, false},
		{`histogram_quantile(0.99, sum by (op, le) (rate(h_bucket{job=~"$job"}[5m])))`, []string{"h_bucket"}, false},
		{`a * on (instance) group_left (version) b unless bool c`, []string{"a", "b", "c"}, false},
		{`sum(x) by (sender)`, []string{"x"}, false},
		{`{__name__="hookonce_inflight"}`, nil, true},
		{`rate(x{a="}"}[5m])`, []string{"x"}, false},
		{`1e3 + 0x1f + 5`, nil, false},
	} {
		got, err := metricNames(c.expr)
		if (err != nil) != c.err || !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%q) = %q, %v; want %q (error %v)", c.expr, got, err, c.want, c.err)
		}
	}
}
