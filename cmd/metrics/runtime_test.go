package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/cmd/metrics"
	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
)

// The backlog gauges say what the server holds for each persona: one
// request running (ack pending) on a one-slot replica, two waiting.
func TestRuntimeCollectorReportsTheConsumerBacklog(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	js, err := jetstream.New(n.Conn(t))
	require.NoError(t, err)
	release := make(chan struct{})
	started := make(chan struct{}, 3)
	block := handlers.Func(func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return handlers.Result{}, nil
	})
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	rt, err := consumers.New(consumers.Config{
		WithoutLedger: true, JetStream: js, Logger: &log, DrainTimeout: 2 * time.Second, FetchMaxWait: 200 * time.Millisecond,
		Personas: []consumers.Persona{{Name: "slow", Handler: block, Policy: testPolicy(1), Concurrency: 1}},
	})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	var state metrics.RuntimeState
	reg.MustRegister(metrics.NewRuntimeCollector(func() metrics.RuntimeState { return state }, 2*time.Second))
	n0, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Zero(t, n0, "nothing before the runtime runs")
	state = rt

	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- rt.Run(ctx) }()
	defer func() { close(release); cancel(); <-ran }()
	for i := range 3 {
		publish(t, js, "slow", fmt.Sprintf("task-%d", i))
	}
	<-started
	want := `
# HELP personaq_consumer_ack_pending_messages Requests delivered and not yet settled: running, held for a retry, or with a lost worker until AckWait (NumAckPending).
# TYPE personaq_consumer_ack_pending_messages gauge
personaq_consumer_ack_pending_messages{persona="slow"} 1
# HELP personaq_consumer_pending_messages Requests waiting in the persona's consumer, not yet delivered to any replica (JetStream NumPending).
# TYPE personaq_consumer_pending_messages gauge
personaq_consumer_pending_messages{persona="slow"} 2
# HELP personaq_ledger_up 1 when the attempt ledger (Redis) answered its last call; 0 while it does not (no attempt starts then).
# TYPE personaq_ledger_up gauge
personaq_ledger_up 1
`
	require.Eventually(t, func() bool {
		return testutil.GatherAndCompare(reg, stringsReader(want),
			"personaq_consumer_pending_messages", "personaq_consumer_ack_pending_messages", "personaq_ledger_up") == nil
	}, 10*time.Second, 20*time.Millisecond)
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
