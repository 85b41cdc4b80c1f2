package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// describingRegistry keeps every collector registered on it, so the test
// can ask each for its descriptions: Gather leaves out a vector that has
// no series yet, the registry's list does not.
type describingRegistry struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *describingRegistry) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registry.Register(c)
}

func (r *describingRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// exportedMetrics is every metric family a replica's /metrics serves
// (serve and dev build their endpoint with newMetricsEndpoint).
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	reg := &describingRegistry{Registry: prometheus.NewRegistry()}
	newMetricsOn("127.0.0.1:0", reg)
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range reg.collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	names := map[string]bool{}
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		require.NotNil(t, m, "description without a name: %s", d)
		names[m[1]] = true
	}
	return names
}

// metricName finds metric names in PromQL: personaq's and the process and
// Go collectors'.
var metricName = regexp.MustCompile(`\b(?:personaq|process|go)_[a-zA-Z0-9_:]+`)

// usedMetrics lists the metric names the alert rules and the dashboard
// query, each with where it is used.
func usedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	add := func(where, expr string) {
		for _, n := range metricName.FindAllString(expr, -1) {
			if !slices.Contains(used[n], where) {
				used[n] = append(used[n], where)
			}
		}
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "deployments", "prometheus", "alerts.yml"))
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert, Record, Expr string
			} `json:"rules"`
		} `json:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &rules))
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			add("alert "+r.Alert+r.Record, r.Expr)
		}
	}
	raw, err = os.ReadFile(filepath.Join("..", "..", "deployments", "grafana", "dashboards", "personaq.json"))
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			add("panel "+p.Title, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		add("variable "+v.Name, string(v.Query))
	}
	require.NotEmpty(t, used)
	return used
}

// family is the metric family a PromQL name belongs to: a histogram's
// _bucket, _sum and _count series are its own name's.
func family(name string, exported map[string]bool) (string, bool) {
	if exported[name] {
		return name, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && exported[base] {
			return base, true
		}
	}
	return name, false
}

// Every metric the shipped dashboard and alert rules use is one the binary
// exports.
func TestDashboardsUseExportedMetricNames(t *testing.T) {
	exported := exportedMetrics(t)
	require.True(t, exported["personaq_attempts_total"], "sanity: the Observer's metrics are described")
	require.True(t, exported["personaq_consumer_pending_messages"], "sanity: the runtime collector is registered")
	var missing []string
	for name, where := range usedMetrics(t) {
		if _, ok := family(name, exported); !ok {
			missing = append(missing, name+" (used by "+strings.Join(where, ", ")+")")
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "metric names the dashboard or alert rules use that the binary does not export:\n  %s", strings.Join(missing, "\n  "))
}
