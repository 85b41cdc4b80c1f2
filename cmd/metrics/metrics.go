package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

const namespace = "personaq"

// Histogram buckets, in seconds.
var (
	// handlerBuckets span a no-op handler to a ten-minute LLM call.
	handlerBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	// latenessBuckets are fine near 0: the target is p50 ≤ 2ms, p99 ≤ 10ms.
	latenessBuckets = []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1}
	// ledgerBuckets: one Redis round trip is ~60µs unloaded on loopback.
	ledgerBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}
	// recordBatchBuckets: a batch holds 4 to 256 terminal records.
	recordBatchBuckets = []float64{4, 8, 16, 32, 64, 128, 256}
	// recordCommitBuckets: a commit is one fsync plus, on single-node file
	// storage, the server's staging store, a few milliseconds.
	recordCommitBuckets = []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 5}
)

// Metrics is a consumers.Observer that records into Prometheus collectors.
// It is safe for concurrent use.
type Metrics struct {
	attempts        *prometheus.CounterVec
	outcomes        *prometheus.CounterVec
	quarantined     *prometheus.CounterVec
	handlerDuration *prometheus.HistogramVec
	inFlight        *prometheus.GaugeVec
	lateness        *prometheus.HistogramVec
	early           *prometheus.CounterVec
	ledgerRTT       *prometheus.HistogramVec
	ledgerErrors    *prometheus.CounterVec
	settleRefused   *prometheus.CounterVec
	staleSettles    *prometheus.CounterVec
	flow            *flowMetrics

	tokens *prometheus.CounterVec
	cost   *prometheus.CounterVec
	// outputTruncated counts live output dropped over its cap.
	outputTruncated *prometheus.CounterVec

	// The terminal records' group commits.
	recordBatch   prometheus.Histogram
	recordCommit  prometheus.Histogram
	recordRefused prometheus.Counter
}

var (
	_ consumers.FenceObserver  = (*Metrics)(nil)
	_ consumers.UsageObserver  = (*Metrics)(nil)
	_ consumers.OutputObserver = (*Metrics)(nil)

	_ consumers.RecordBatchObserver = (*Metrics)(nil)
)

// New creates the collectors and registers them, with the process and Go
// runtime collectors, on reg (nil: registered nowhere). Registering on a
// registry that already has them reuses the registered ones, so two
// Metrics on one registry count into the same series.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "attempts_total",
			Help: "Persona handler invocations, by how they were classified.",
		}, []string{"persona", "class"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "outcomes_total",
			Help: "Requests that reached a terminal state, by outcome and reason.",
		}, []string{"persona", "outcome", "reason"}),
		quarantined: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "quarantined_total",
			Help: "Quarantine records written (every terminal outcome but succeeded), by reason.",
		}, []string{"persona", "reason"}),
		handlerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "handler_duration_seconds",
			Help: "Time one attempt's handler ran.", Buckets: handlerBuckets,
		}, []string{"persona"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "in_flight",
			Help: "Attempts running now on this replica.",
		}, []string{"persona"}),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "redelivery_lateness_seconds",
			Help:    "How late a retry's attempt started against its due time: the failed attempt's end plus the delay asked for (early ones count as 0, see redelivery_early_total).",
			Buckets: latenessBuckets,
		}, []string{"persona"}),
		early: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "redelivery_early_total",
			Help: "Retries whose attempt started before its due time.",
		}, []string{"persona"}),
		ledgerRTT: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "ledger_round_trip_seconds",
			Help: "Time of one attempt-ledger call, by operation.", Buckets: ledgerBuckets,
		}, []string{"op"}),
		ledgerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "ledger_errors_total",
			Help: "Attempt-ledger calls that failed, by operation.",
		}, []string{"op"}),
		settleRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "settle_refused_total",
			Help: "Settles refused because the request already had a different terminal record (stale or racing replica), by the outcome refused.",
		}, []string{"persona", "outcome"}),
		staleSettles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "stale_settles_refused_total",
			Help: "Settles refused because this replica had lost the attempt's lease or its claim on the message (frozen, partitioned, Redis unreachable), by what was refused.",
		}, []string{"persona", "op"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "tokens_total",
			Help: "Tokens attempts used at their model provider, as handlers reported them, by direction (input, output).",
		}, []string{"persona", "direction"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "cost_usd_total",
			Help: "Cost in US dollars of attempts, as handlers reported it (attempts that report none add nothing).",
		}, []string{"persona"}),
		outputTruncated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "output_truncated_bytes_total",
			Help: "Live output bytes attempts wrote past the live output cap, dropped (the terminal record's output is not affected).",
		}, []string{"persona"}),
	}
	m.recordBatch = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "record_batch_records",
		Help: "Terminal records per atomic batch commit (records per fsync of the outcomes stream).", Buckets: recordBatchBuckets,
	})
	m.recordCommit = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "record_batch_duration_seconds",
		Help: "Time of one atomic batch commit of terminal records, sent to confirmed.", Buckets: recordCommitBuckets,
	})
	m.recordRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "record_batches_refused_total",
		Help: "Atomic batches of terminal records the server refused (a record of a request already ended, a timeout); their records were written one by one.",
	})
	m.flow = newFlowMetrics(reg)
	if reg == nil {
		return m
	}
	register(reg, &m.attempts)
	register(reg, &m.outcomes)
	register(reg, &m.quarantined)
	register(reg, &m.handlerDuration)
	register(reg, &m.inFlight)
	register(reg, &m.lateness)
	register(reg, &m.early)
	register(reg, &m.ledgerRTT)
	register(reg, &m.ledgerErrors)
	register(reg, &m.settleRefused)
	register(reg, &m.staleSettles)
	register(reg, &m.tokens)
	register(reg, &m.cost)
	register(reg, &m.outputTruncated)
	register(reg, &m.recordBatch)
	register(reg, &m.recordCommit)
	register(reg, &m.recordRefused)
	register(reg, new(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})))
	register(reg, new(collectors.NewGoCollector()))
	return m
}

// register registers *c on reg; when an equal collector is already there
// it points *c at that one instead. Any other failure is a programming
// error (a name clash with different labels) and panics, like MustRegister.
func register[C prometheus.Collector](reg prometheus.Registerer, c *C) {
	err := reg.Register(*c)
	var are prometheus.AlreadyRegisteredError
	switch {
	case err == nil:
	case errors.As(err, &are):
		if existing, ok := are.ExistingCollector.(C); ok {
			*c = existing
		}
	default:
		panic(err)
	}
}

// Attempt implements consumers.Observer.
func (m *Metrics) Attempt(persona string, class retry.Class, took time.Duration) {
	m.attempts.WithLabelValues(persona, class.String()).Inc()
	m.handlerDuration.WithLabelValues(persona).Observe(took.Seconds())
}

// Outcome implements consumers.Observer.
func (m *Metrics) Outcome(persona string, outcome schemas.Outcome, reason schemas.Reason) {
	m.outcomes.WithLabelValues(persona, string(outcome), string(reason)).Inc()
	if outcome != schemas.OutcomeSucceeded {
		m.quarantined.WithLabelValues(persona, string(reason)).Inc()
	}
}

// InFlight implements consumers.Observer.
func (m *Metrics) InFlight(persona string, delta int) {
	m.inFlight.WithLabelValues(persona).Add(float64(delta))
}

// RedeliveryLateness implements consumers.Observer. An early retry counts
// in redelivery_early_total and as 0 in the histogram.
func (m *Metrics) RedeliveryLateness(persona string, late time.Duration) {
	if late < 0 {
		m.early.WithLabelValues(persona).Inc()
		late = 0
	}
	m.lateness.WithLabelValues(persona).Observe(late.Seconds())
}

// LedgerCall implements consumers.Observer.
func (m *Metrics) LedgerCall(op string, took time.Duration, err error) {
	m.ledgerRTT.WithLabelValues(op).Observe(took.Seconds())
	if err != nil {
		m.ledgerErrors.WithLabelValues(op).Inc()
	}
}

// SettleRefused implements consumers.Observer.
func (m *Metrics) SettleRefused(persona string, outcome schemas.Outcome) {
	m.settleRefused.WithLabelValues(persona, string(outcome)).Inc()
}

// StaleSettle implements consumers.FenceObserver.
func (m *Metrics) StaleSettle(persona, op string) {
	m.staleSettles.WithLabelValues(persona, op).Inc()
}

// OutputTruncated implements consumers.OutputObserver.
func (m *Metrics) OutputTruncated(persona string, bytes int64) {
	m.outputTruncated.WithLabelValues(persona).Add(float64(bytes))
}

// RecordBatch implements consumers.RecordBatchObserver.
func (m *Metrics) RecordBatch(records int, took time.Duration, err error) {
	m.recordBatch.Observe(float64(records))
	m.recordCommit.Observe(took.Seconds())
	if err != nil {
		m.recordRefused.Inc()
	}
}

// Usage implements consumers.UsageObserver.
func (m *Metrics) Usage(persona string, u retry.Usage) {
	if u.InputTokens > 0 {
		m.tokens.WithLabelValues(persona, "input").Add(float64(u.InputTokens))
	}
	if u.OutputTokens > 0 {
		m.tokens.WithLabelValues(persona, "output").Add(float64(u.OutputTokens))
	}
	if u.CostUSD > 0 {
		m.cost.WithLabelValues(persona).Add(u.CostUSD)
	}
}
