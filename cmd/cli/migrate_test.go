package cli_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// migrationReplica runs one replica of persona "mig" whose handler counts
// its runs per request; stop drains it.
func migrationReplica(t *testing.T, js jetstream.JetStream, l *ledger.Ledger, runs *sync.Map) (stop func()) {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	h := handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		n, _ := runs.LoadOrStore(req.Message.RequestID, new(int64))
		migrationMu.Lock()
		*n.(*int64)++
		migrationMu.Unlock()
		time.Sleep(20 * time.Millisecond)
		return handlers.Result{}, nil
	})
	rt, err := consumers.New(consumers.Config{
		JetStream: js, Ledger: l, Logger: &log, DrainTimeout: 5 * time.Second, FetchMaxWait: 200 * time.Millisecond,
		Personas: []consumers.Persona{{Name: "mig", Handler: h, Concurrency: 4, Policy: retry.Policy{
			Name: "test", MaxAttempts: 2, AttemptTimeout: 5 * time.Second, Schedule: retry.Linear{Step: 50 * time.Millisecond},
		}}},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	return func() { cancel(); require.NoError(t, <-done) }
}

// migrationMu guards the run counters.
var migrationMu sync.Mutex

// A deployment whose requests stream is a work queue (provisioned by an
// earlier personaq) moves to limits retention with requests queued: the
// replica is stopped mid-way, migrate-requests runs while a caller keeps
// submitting, and a replica of this version ends every request, each run
// exactly once.
func TestMigrateRequestsKeepsEveryOpenRequestAndRunsNoneTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := testenv.StartNATS(t)
	js := n.JetStream(t)
	topo := wire.Topology{}.WithDefaults()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{ // as an earlier version provisioned it
		Name: topo.RequestsStream, Subjects: []string{topo.RequestsPrefix + ".>"}, Retention: jetstream.WorkQueuePolicy,
		Description: "personaq persona requests",
	})
	require.NoError(t, err)
	r := testenv.StartRedis(t)
	l, err := ledger.New(ledger.Config{Client: r.Client(t)})
	require.NoError(t, err)
	_, err = l.Epoch(ctx)
	require.NoError(t, err)

	var runs sync.Map
	const total = 60
	var (
		idsMu sync.Mutex
		ids   []string
	)
	publish := func() {
		req := schemas.NewRequest("t-mig", "main", "mig")
		_, err := wire.PublishRequest(ctx, js, topo, req)
		require.NoError(t, err)
		idsMu.Lock()
		ids = append(ids, req.RequestID)
		idsMu.Unlock()
	}
	for range total - 10 {
		publish()
	}
	stop := migrationReplica(t, js, l, &runs)
	require.Eventually(t, func() bool { return count(&runs) >= 10 }, 10*time.Second, 5*time.Millisecond)
	stop()
	ret, err := consumers.RequestRetention(ctx, js, topo)
	require.NoError(t, err)
	require.Equal(t, jetstream.WorkQueuePolicy, ret, "this version keeps a work queue it finds")
	open, err := consumers.Unsettled(ctx, js, topo)
	require.NoError(t, err)
	require.Positive(t, open, "requests still queued when the migration starts")

	// A caller goes on submitting through the migration: a submit the
	// server acknowledged is kept; one refused (no requests stream for a
	// moment) is the caller's to send again.
	stopSubmits := make(chan struct{})
	var submits sync.WaitGroup
	acked, refused := 0, 0
	submits.Go(func() {
		for {
			select {
			case <-stopSubmits:
				return
			default:
			}
			req := schemas.NewRequest("t-mig", "main", "mig")
			if _, err := wire.PublishRequest(ctx, js, topo, req); err != nil {
				refused++
			} else {
				acked++
				idsMu.Lock()
				ids = append(ids, req.RequestID)
				idsMu.Unlock()
			}
			time.Sleep(time.Millisecond)
		}
	})
	code, out, errOut := run(t, ctx, "--nats-url", n.URL(), "migrate-requests")
	close(stopSubmits)
	submits.Wait()
	t.Logf("submits during the migration: %d acknowledged, %d refused", acked, refused)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "limits retention")
	ret, err = consumers.RequestRetention(ctx, js, topo)
	require.NoError(t, err)
	require.Equal(t, jetstream.LimitsPolicy, ret)
	moved, err := consumers.Unsettled(ctx, js, topo)
	require.NoError(t, err)
	require.Equal(t, open+uint64(acked), moved, "every open request moved, none twice, and every acknowledged submit kept")
	for range 10 { // a caller submitting after the migration
		publish()
	}
	code, out, errOut = run(t, ctx, "--nats-url", n.URL(), "migrate-requests")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "0 open requests moved", "a second run has nothing to do")

	stop = migrationReplica(t, js, l, &runs)
	defer stop()
	outcomes := wire.NewOutcomes(js, topo)
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if _, err := outcomes.Lookup(ctx, id); err != nil {
				return false
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond, "every request ends")
	migrationMu.Lock()
	defer migrationMu.Unlock()
	for _, id := range ids {
		v, ok := runs.Load(id)
		require.True(t, ok, "request %s never ran", id)
		require.EqualValues(t, 1, *v.(*int64), "request %s ran more than once", id)
	}
}

func count(m *sync.Map) int {
	n := 0
	m.Range(func(_, _ any) bool { n++; return true })
	return n
}
