package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/personaq/personaq/consumers"
)

// RuntimeState is what a RuntimeCollector reads at each scrape;
// *consumers.Runtime implements it.
type RuntimeState interface {
	Backlogs(ctx context.Context) ([]consumers.Backlog, error)
	LedgerUp() bool
}

// RuntimeCollector exports the replica's view of the server and the
// ledger, read at scrape time: each persona consumer's backlog (what
// KEDA's NATS scaler calls lag is pending + ack_pending) and whether the
// attempt ledger answers.
type RuntimeCollector struct {
	state       func() RuntimeState
	timeout     time.Duration
	pending     *prometheus.Desc
	ackPending  *prometheus.Desc
	redelivered *prometheus.Desc
	ledgerUp    *prometheus.Desc
	infoUp      *prometheus.Desc
}

var _ prometheus.Collector = (*RuntimeCollector)(nil)

// NewRuntimeCollector reads state() at each scrape (nil: the runtime is
// not running yet; nothing is exported), giving the server timeout to
// answer.
func NewRuntimeCollector(state func() RuntimeState, timeout time.Duration) *RuntimeCollector {
	persona := []string{"persona"}
	return &RuntimeCollector{
		state: state, timeout: timeout,
		pending: prometheus.NewDesc(namespace+"_consumer_pending_messages",
			"Requests waiting in the persona's consumer, not yet delivered to any replica (JetStream NumPending).", persona, nil),
		ackPending: prometheus.NewDesc(namespace+"_consumer_ack_pending_messages",
			"Requests delivered and not yet settled: running, held for a retry, or with a lost worker until AckWait (NumAckPending).", persona, nil),
		redelivered: prometheus.NewDesc(namespace+"_consumer_redelivered_messages",
			"Unsettled requests delivered more than once (NumRedelivered).", persona, nil),
		ledgerUp: prometheus.NewDesc(namespace+"_ledger_up",
			"1 when the attempt ledger (Redis) answered its last call; 0 while it does not (no attempt starts then).", nil, nil),
		infoUp: prometheus.NewDesc(namespace+"_consumer_info_up",
			"1 when the consumers' backlog could be read from the server at this scrape, else 0.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *RuntimeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.ackPending, c.redelivered, c.ledgerUp, c.infoUp} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *RuntimeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.state()
	if st == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.ledgerUp, prometheus.GaugeValue, boolValue(st.LedgerUp()))
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	backlogs, err := st.Backlogs(ctx)
	ch <- prometheus.MustNewConstMetric(c.infoUp, prometheus.GaugeValue, boolValue(err == nil))
	for _, b := range backlogs {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(b.Pending), b.Persona)
		ch <- prometheus.MustNewConstMetric(c.ackPending, prometheus.GaugeValue, float64(b.AckPending), b.Persona)
		ch <- prometheus.MustNewConstMetric(c.redelivered, prometheus.GaugeValue, float64(b.Redelivered), b.Persona)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
