package metrics_test

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/metrics"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// series returns the metrics of family name whose labels include want.
func series(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) []*dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	var out []*dto.Metric
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, want) {
				out = append(out, m)
			}
		}
	}
	return out
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, lp := range m.GetLabel() {
		got[lp.GetName()] = lp.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// value is the counter, gauge or histogram count of the one series of name
// with labels (0 when there is none).
func value(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	ms := series(t, g, name, labels)
	require.LessOrEqual(t, len(ms), 1, "%s%v matches several series", name, labels)
	if len(ms) == 0 {
		return 0
	}
	m := ms[0]
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	t.Fatalf("%s: unexpected metric type", name)
	return 0
}

type lbl = map[string]string

func TestObserverRecordsEveryCall(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)

	m.Attempt("planner", retry.ClassSucceeded, 120*time.Millisecond)
	m.Attempt("planner", retry.ClassTimeout, time.Second)
	m.Attempt("planner", retry.ClassTimeout, 2*time.Second)
	m.Outcome("planner", schemas.OutcomeSucceeded, "")
	m.Outcome("planner", schemas.OutcomeQuarantined, schemas.ReasonExhausted)
	m.Outcome("tester", schemas.OutcomeDeferred, schemas.ReasonDeferred)
	m.InFlight("planner", 1)
	m.InFlight("planner", 1)
	m.InFlight("planner", -1)
	m.LedgerCall("begin", 80*time.Microsecond, nil)
	m.LedgerCall("finish", time.Millisecond, errors.New("redis down"))

	cases := []struct {
		name   string
		labels lbl
		want   float64
	}{
		{"personaq_attempts_total", lbl{"persona": "planner", "class": "succeeded"}, 1},
		{"personaq_attempts_total", lbl{"persona": "planner", "class": "timeout"}, 2},
		{"personaq_handler_duration_seconds", lbl{"persona": "planner"}, 3},
		{"personaq_outcomes_total", lbl{"persona": "planner", "outcome": "succeeded", "reason": ""}, 1},
		{"personaq_outcomes_total", lbl{"persona": "planner", "outcome": "quarantined", "reason": "exhausted"}, 1},
		{"personaq_quarantined_total", lbl{"persona": "planner", "reason": "exhausted"}, 1},
		{"personaq_quarantined_total", lbl{"persona": "tester", "reason": "deferred"}, 1},
		{"personaq_quarantined_total", lbl{"persona": "planner", "reason": ""}, 0},
		{"personaq_in_flight", lbl{"persona": "planner"}, 1},
		{"personaq_ledger_round_trip_seconds", lbl{"op": "begin"}, 1},
		{"personaq_ledger_round_trip_seconds", lbl{"op": "finish"}, 1},
		{"personaq_ledger_errors_total", lbl{"op": "finish"}, 1},
		{"personaq_ledger_errors_total", lbl{"op": "begin"}, 0},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, value(t, reg, tc.name, tc.labels), "%s%v", tc.name, tc.labels)
	}
	h := series(t, reg, "personaq_handler_duration_seconds", lbl{"persona": "planner"})[0].GetHistogram()
	require.InDelta(t, 3.12, h.GetSampleSum(), 1e-9)
}

func TestEarlyRedeliveryClampsToZeroAndCountsApart(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.RedeliveryLateness("flaky", 3*time.Millisecond)
	m.RedeliveryLateness("flaky", -40*time.Millisecond)

	require.Equal(t, 1.0, value(t, reg, "personaq_redelivery_early_total", lbl{"persona": "flaky"}))
	h := series(t, reg, "personaq_redelivery_lateness_seconds", lbl{"persona": "flaky"})[0].GetHistogram()
	require.EqualValues(t, 2, h.GetSampleCount())
	require.InDelta(t, 0.003, h.GetSampleSum(), 1e-9, "the early one adds 0")
	first := h.GetBucket()[0]
	require.InDelta(t, 0.0005, first.GetUpperBound(), 1e-12, "buckets start at 0.5ms")
	require.EqualValues(t, 1, first.GetCumulativeCount(), "the clamped sample lands in the first bucket")
}

func TestNewRegistersProcessAndGoCollectors(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	metrics.New(reg)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	require.True(t, names["go_goroutines"], "go collector")
	require.True(t, names["process_resident_memory_bytes"], "process collector")
}

func TestTwoMetricsOnOneRegistryShareSeries(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	a := metrics.New(reg)
	b := metrics.New(reg) // must not panic
	a.Attempt("echo", retry.ClassSucceeded, time.Millisecond)
	b.Attempt("echo", retry.ClassSucceeded, time.Millisecond)
	require.Equal(t, 2.0, value(t, reg, "personaq_attempts_total", lbl{"persona": "echo", "class": "succeeded"}))
}

func TestNewWithoutRegistryStillObserves(t *testing.T) {
	t.Parallel()
	m := metrics.New(nil)
	m.Attempt("echo", retry.ClassSucceeded, time.Millisecond)
	m.RedeliveryLateness("echo", -time.Millisecond)
	m.LedgerCall("begin", time.Millisecond, nil)
}

func TestUsageCountsTokensAndCost(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.Usage("planner", retry.Usage{InputTokens: 1200, OutputTokens: 300, CostUSD: 0.25})
	m.Usage("planner", retry.Usage{InputTokens: 800, OutputTokens: 100})
	m.Usage("coder", retry.Usage{OutputTokens: 5, CostUSD: 0.5})

	require.Equal(t, 2000.0, value(t, reg, "personaq_tokens_total", lbl{"persona": "planner", "direction": "input"}))
	require.Equal(t, 400.0, value(t, reg, "personaq_tokens_total", lbl{"persona": "planner", "direction": "output"}))
	require.Equal(t, 5.0, value(t, reg, "personaq_tokens_total", lbl{"persona": "coder", "direction": "output"}))
	require.Empty(t, series(t, reg, "personaq_tokens_total", lbl{"persona": "coder", "direction": "input"}), "no zero series")
	require.InDelta(t, 0.25, value(t, reg, "personaq_cost_usd_total", lbl{"persona": "planner"}), 1e-12)
	require.InDelta(t, 0.5, value(t, reg, "personaq_cost_usd_total", lbl{"persona": "coder"}), 1e-12)
}

func TestOutputTruncatedCountsBytes(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.OutputTruncated("planner", 200)
	m.OutputTruncated("planner", 50)
	require.Equal(t, 250.0, value(t, reg, "personaq_output_truncated_bytes_total", lbl{"persona": "planner"}))
}

func TestRecordBatchCountsRecordsAndRefusals(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.RecordBatch(40, 3*time.Millisecond, nil)
	m.RecordBatch(8, 2*time.Millisecond, errors.New("refused"))
	require.Equal(t, 2.0, value(t, reg, "personaq_record_batch_records", nil))
	require.Equal(t, 2.0, value(t, reg, "personaq_record_batch_duration_seconds", nil))
	require.Equal(t, 1.0, value(t, reg, "personaq_record_batches_refused_total", nil))
	ms := series(t, reg, "personaq_record_batch_records", nil)
	require.Len(t, ms, 1)
	require.Equal(t, 48.0, ms[0].Histogram.GetSampleSum(), "records summed over batches")
}
