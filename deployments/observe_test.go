package deployments_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The observability files: Prometheus' config and alert rules, Grafana's
// provisioning and dashboard. Their metric names are checked against what
// the binary exports in cmd/cli (TestDashboardsUseExportedMetricNames).
var (
	promConfig    = filepath.Join("prometheus", "prometheus.yml")
	alertRules    = filepath.Join("prometheus", "alerts.yml")
	alertTests    = filepath.Join("prometheus", "alerts_test.yml")
	dashboardFile = filepath.Join("grafana", "dashboards", "personaq.json")
)

// promtool finds Debian's promtool (package prometheus), or skips the test
// (fails it when CI is set).
func promtool(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no promtool on PATH (apt-get install prometheus); CI is set, so this is a failure, not a skip")
		}
		t.Skip("no promtool on PATH: rule checks skipped (apt-get install prometheus)")
	}
	return bin
}

func runPromtool(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// promtool check config also checks the rule files the config names.
func TestPrometheusConfigAndRulesCheck(t *testing.T) {
	t.Parallel()
	out := runPromtool(t, "check", "config", promConfig)
	require.Contains(t, out, "SUCCESS: 5 rules found")
	runPromtool(t, "check", "rules", alertRules)
}

// Each alert fires on the series it is meant for, and only then
// (prometheus/alerts_test.yml).
func TestAlertRulesUnitTests(t *testing.T) {
	t.Parallel()
	runPromtool(t, "test", "rules", alertTests)
}

// The alerts the issue asks for are there.
func TestAlertRulesCoverTheOperatorsQuestions(t *testing.T) {
	t.Parallel()
	names := map[string]string{}
	for _, r := range readRules(t) {
		names[r.Alert] = r.Expr
	}
	for _, want := range []string{"PersonaqQuarantineGrowing", "PersonaqLedgerUnavailable", "PersonaqCircuitOpen", "PersonaqConsumerLag"} {
		require.Contains(t, names, want)
	}
}

type rule struct {
	Alert  string `json:"alert"`
	Record string `json:"record"`
	Expr   string `json:"expr"`
}

func readRules(t *testing.T) []rule {
	t.Helper()
	raw, err := os.ReadFile(alertRules)
	require.NoError(t, err)
	var f struct {
		Groups []struct {
			Rules []rule `json:"rules"`
		} `json:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &f))
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// grafanaVar is a Grafana template variable in a query.
var grafanaVar = regexp.MustCompile(`\$\{?(__rate_interval|__interval|__range|[a-z]+)\}?`)

// promQL turns a dashboard query into PromQL promtool can parse: ranges
// become 5m, other variables a regex matching anything.
func promQL(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.Contains(v, "__") {
			return "5m"
		}
		return ".*"
	})
}

// Every dashboard query parses as PromQL: they are written into a rule
// file as recording rules and checked by promtool.
func TestDashboardQueriesParse(t *testing.T) {
	t.Parallel()
	exprs := dashboardQueries(t)
	require.NotEmpty(t, exprs)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		q, err := json.Marshal(promQL(e))
		require.NoError(t, err)
		fmt.Fprintf(&b, "      - record: dashboard:query_%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	runPromtool(t, "check", "rules", path)
}

// dashboard is the part of Grafana's dashboard model this test reads.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	return d
}

func dashboardQueries(t *testing.T) []string {
	t.Helper()
	d := readDashboard(t)
	var out []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out = append(out, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// The dashboard imports anywhere: it names its data source through a
// variable, every panel has a query, and panel ids are unique.
func TestDashboardShape(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	require.Equal(t, "personaq-overview", d.UID)
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	require.Equal(t, "datasource", vars["datasource"])
	require.Equal(t, "query", vars["persona"])
	ids := map[int]string{}
	for _, p := range d.Panels {
		require.NotContains(t, ids, p.ID, "panel id %d of %q is also %q's", p.ID, p.Title, ids[p.ID])
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		require.NotNil(t, p.Datasource, p.Title)
		require.Equal(t, "${datasource}", p.Datasource.UID, p.Title)
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			require.NotEmpty(t, strings.TrimSpace(tg.Expr), p.Title)
		}
	}
}

// composeFile is the part of the compose file the observability services
// are checked by.
type composeFile struct {
	Services map[string]struct {
		Image    string   `json:"image"`
		Profiles []string `json:"profiles"`
		Volumes  []string `json:"volumes"`
		Command  []string `json:"command"`
	} `json:"services"`
	Volumes map[string]any `json:"volumes"`
}

// Compose wires Prometheus and Grafana (profile observability, images from
// the environment) to the rules, the dashboard and its provisioning: every
// file it mounts exists, and Prometheus' config names the rule file it is
// given.
func TestComposeWiresPrometheusAndGrafana(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("compose")
	raw, err := os.ReadFile(filepath.Join(dir, "docker-compose.yml"))
	require.NoError(t, err)
	var f composeFile
	require.NoError(t, yaml.Unmarshal(raw, &f))
	mounts := map[string]string{}
	for _, name := range []string{"prometheus", "grafana"} {
		s, ok := f.Services[name]
		require.True(t, ok, "service %s", name)
		require.Equal(t, []string{"observability"}, s.Profiles, "%s only with --profile observability: offline there is no image", name)
		require.Regexp(t, `^\$\{[A-Z_]+_IMAGE:-[a-z/]+:v?[0-9.]+\}$`, s.Image, "%s's image comes from the environment", name)
		for _, v := range s.Volumes {
			host, target, _ := strings.Cut(v, ":")
			target = strings.TrimSuffix(target, ":ro")
			if !strings.HasPrefix(host, ".") {
				require.Contains(t, f.Volumes, host, "named volume %s", host)
				continue
			}
			_, err := os.Stat(filepath.Join(dir, host))
			require.NoError(t, err, "%s mounts %s", name, host)
			mounts[filepath.Clean(filepath.Join(dir, host))] = target
		}
	}
	require.Equal(t, "/etc/prometheus/prometheus.yml", mounts[promConfig])
	require.Equal(t, "/etc/prometheus/alerts.yml", mounts[alertRules], "beside the config, which names it relatively")
	require.Equal(t, "/var/lib/grafana/dashboards", mounts[filepath.Dir(dashboardFile)])
	require.Equal(t, "/etc/grafana/provisioning", mounts[filepath.Join("grafana", "provisioning")])
	require.Contains(t, f.Services["prometheus"].Command, "--config.file=/etc/prometheus/prometheus.yml")

	raw, err = os.ReadFile(filepath.Join("grafana", "provisioning", "dashboards", "personaq.yml"))
	require.NoError(t, err)
	var prov struct {
		Providers []struct {
			Options struct {
				Path string `json:"path"`
			} `json:"options"`
		} `json:"providers"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &prov))
	require.Len(t, prov.Providers, 1)
	require.Equal(t, "/var/lib/grafana/dashboards", prov.Providers[0].Options.Path, "Grafana loads the mounted dashboards")

	if bin, err := exec.LookPath("docker-compose"); err == nil {
		out, err := exec.Command(bin, "-f", filepath.Join(dir, "docker-compose.yml"), "--profile", "observability", "config", "-q").CombinedOutput()
		require.NoError(t, err, "docker-compose config:\n%s", out)
	}
}
