package metrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/metrics"
)

// TestFlowMetrics pins the flow control series by name: dashboards and
// the KEDA ScaledObject (personaq_runnable_backlog) reference them.
func TestFlowMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.CircuitOpen("planner", true)
	m.CircuitOpen("coder", true)
	m.CircuitOpen("coder", false)
	m.RunnableBacklog("planner", 0)
	m.RunnableBacklog("coder", 42)
	m.LimiterWait("openai", 0)
	m.LimiterWait("openai", 250*time.Millisecond)
	m.LimiterCoolDown("openai")
	m.ProviderThrottled("planner")
	m.ProviderThrottled("planner")
	type lbl = map[string]string
	for _, tc := range []struct {
		name   string
		labels lbl
		want   float64
	}{
		{"personaq_circuit_open", lbl{"persona": "planner"}, 1},
		{"personaq_circuit_open", lbl{"persona": "coder"}, 0},
		{"personaq_runnable_backlog", lbl{"persona": "coder"}, 42},
		{"personaq_runnable_backlog", lbl{"persona": "planner"}, 0},
		{"personaq_limiter_wait_seconds", lbl{"limiter": "openai"}, 2},
		{"personaq_limiter_cooldowns_total", lbl{"limiter": "openai"}, 1},
		{"personaq_provider_throttled_total", lbl{"persona": "planner"}, 2},
	} {
		require.Equal(t, tc.want, value(t, reg, tc.name, tc.labels), "%s%v", tc.name, tc.labels)
	}
	h := series(t, reg, "personaq_limiter_wait_seconds", lbl{"limiter": "openai"})[0].GetHistogram()
	require.InDelta(t, 0.25, h.GetSampleSum(), 1e-9)
}
