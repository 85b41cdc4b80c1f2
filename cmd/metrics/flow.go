package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/personaq/personaq/consumers"
)

// limiterWaitBuckets span no wait to a minute-long cool-down.
var limiterWaitBuckets = []float64{0, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// flowMetrics are flow control's collectors (consumers.FlowObserver).
type flowMetrics struct {
	circuitOpen *prometheus.GaugeVec
	runnable    *prometheus.GaugeVec
	limiterWait *prometheus.HistogramVec
	cooldowns   *prometheus.CounterVec
	throttled   *prometheus.CounterVec
}

var _ consumers.FlowObserver = (*Metrics)(nil)

func newFlowMetrics(reg prometheus.Registerer) *flowMetrics {
	f := &flowMetrics{
		circuitOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "circuit_open",
			Help: "1 while the persona's circuit is open or half-open (as this replica sees the shared state), 0 when closed.",
		}, []string{"persona"}),
		runnable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "runnable_backlog",
			Help: "Requests that could start now: pending plus in flight (what KEDA's JetStream scaler counts), 0 while the circuit is open or half-open or the limiter cools down, at most one minute of the limiter's requests. Every replica reports the same value: aggregate with max.",
		}, []string{"persona"}),
		limiterWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "limiter_wait_seconds",
			Help: "How long a pull waited for its rate limiter's permits (0: none).", Buckets: limiterWaitBuckets,
		}, []string{"limiter"}),
		cooldowns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "limiter_cooldowns_total",
			Help: "Cool-downs a provider's 429 or 529 started on a rate limiter (every replica stops starting its requests).",
		}, []string{"limiter"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "provider_throttled_total",
			Help: "429 and 529 answers a persona's provider gave.",
		}, []string{"persona"}),
	}
	if reg != nil {
		register(reg, &f.circuitOpen)
		register(reg, &f.runnable)
		register(reg, &f.limiterWait)
		register(reg, &f.cooldowns)
		register(reg, &f.throttled)
	}
	return f
}

// CircuitOpen implements consumers.FlowObserver.
func (m *Metrics) CircuitOpen(persona string, open bool) {
	v := 0.0
	if open {
		v = 1
	}
	m.flow.circuitOpen.WithLabelValues(persona).Set(v)
}

// RunnableBacklog implements consumers.FlowObserver.
func (m *Metrics) RunnableBacklog(persona string, n int) {
	m.flow.runnable.WithLabelValues(persona).Set(float64(n))
}

// LimiterWait implements consumers.FlowObserver.
func (m *Metrics) LimiterWait(limiter string, waited time.Duration) {
	m.flow.limiterWait.WithLabelValues(limiter).Observe(waited.Seconds())
}

// LimiterCoolDown implements consumers.FlowObserver.
func (m *Metrics) LimiterCoolDown(limiter string) {
	m.flow.cooldowns.WithLabelValues(limiter).Inc()
}

// ProviderThrottled implements consumers.FlowObserver.
func (m *Metrics) ProviderThrottled(persona string) {
	m.flow.throttled.WithLabelValues(persona).Inc()
}
