package advisory_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/advisory"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

const (
	helperEnv   = "PERSONAQ_ADVISORY_HELPER"
	helperURL   = "PERSONAQ_ADVISORY_HELPER_NATS"
	crashExit   = 3
	crashPolicy = "crashy"
)

// crashPersona is served by the helper process: its handler kills the
// process, so the message is never acked.
func crashPersona(h handlers.Handler) consumers.Persona {
	return consumers.Persona{
		Name: crashPolicy, Handler: h, Concurrency: 1, MaxReplicas: 1,
		AckWait: 500 * time.Millisecond, MaxDeliver: 3,
		Policy: retry.Policy{Name: "test", MaxAttempts: 10, AttemptTimeout: 5 * time.Second},
	}
}

// TestHelperProcess is not a test: it is the worker process that dies.
// It runs the real runtime; the handler exits the process on the first
// message, without acking. With nothing to do it exits 0 after 1.5s.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "crash" {
		t.Skip("helper process only")
	}
	nc, err := nats.Connect(os.Getenv(helperURL))
	if err != nil {
		os.Exit(2)
	}
	js, _ := jetstream.New(nc)
	exit := handlers.Func(func(context.Context, *handlers.Request) (handlers.Result, error) {
		os.Exit(crashExit)
		return handlers.Result{}, nil
	})
	rt, err := consumers.New(consumers.Config{WithoutLedger: true, JetStream: js, Personas: []consumers.Persona{crashPersona(exit)}, FetchMaxWait: 100 * time.Millisecond})
	if err != nil {
		os.Exit(2)
	}
	c, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_ = rt.Run(c)
	os.Exit(0)
}

// runCrashingWorker runs the helper process once and returns its exit code.
func runCrashingWorker(t *testing.T, url string) int {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(c, os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"=crash", helperURL+"="+url)
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

func newListener(t *testing.T, b *bundle, js jetstream.JetStream) *advisory.Listener {
	t.Helper()
	l, err := advisory.NewListener(advisory.Config{
		JetStream: js, Writer: dlq.NewWriter(js, b.topo.QuarantineSubject), Logger: &b.log, SweepGrace: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	return l
}

// A request that kills its worker every time is redelivered until its
// last delivery (MaxDeliver), which the runtime does not run: it moves the
// request to the quarantine itself, as max_deliveries — once, with two
// advisory listeners running, which find nothing left to capture — and it
// leaves the requests stream.
func TestCrashLoopingRequestIsQuarantinedOnce(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	p := crashPersona(handlers.Func(nil))
	require.NoError(t, consumers.Provision(ctx(t), b.js, b.topo, []consumers.ConsumerSpec{{
		Persona: p.Name, AckWait: p.AckWait, MaxAckPending: 1, MaxDeliver: p.MaxDeliver,
	}}))
	for range 2 {
		l := newListener(t, b, b.nats.JetStream(t))
		require.NoError(t, l.Start(context.Background()))
		t.Cleanup(l.Stop)
	}
	req := schemas.NewRequest("crash-task", "main", p.Name)
	payload, err := schemas.Encode(req)
	require.NoError(t, err)
	ack, err := consumers.PublishRequest(ctx(t), b.js, b.topo, req)
	require.NoError(t, err)

	// The worker is restarted after every crash, as a supervisor would; the
	// restarted worker gets the next delivery once the last AckWait ran out.
	var entries []dlq.Entry
	captured := func() bool {
		entries, err = b.insp.List(ctx(t), dlq.Filter{Reasons: []schemas.Reason{schemas.ReasonMaxDeliveries}})
		require.NoError(t, err)
		open, err := consumers.Unsettled(ctx(t), b.js, b.topo) // termed: the trimmer removes it later
		require.NoError(t, err)
		return len(entries) > 0 && open == 0
	}
	crashes := 0
	for run := 0; run < 2*p.MaxDeliver && !captured(); run++ {
		if runCrashingWorker(t, b.nats.URL()) == crashExit {
			crashes++
		}
	}
	require.Equal(t, p.MaxDeliver-1, crashes, "the worker died on every delivery but the last, which it quarantined unrun")
	require.Eventually(t, captured, 15*time.Second, 20*time.Millisecond, "record stored and message settled")
	require.Len(t, entries, 1)
	rec := entries[0].Record
	require.Equal(t, dlq.RecordID(b.topo.RequestsStream, ack.Sequence), rec.ID)
	require.Equal(t, payload, rec.Payload, "payload intact")
	require.Equal(t, b.topo.RequestSubject(p.Name), rec.OriginalSubject)
	require.EqualValues(t, p.MaxDeliver, rec.Deliveries)
	require.Equal(t, req.RequestID, rec.RequestID)
	require.Equal(t, p.Name, rec.Persona)
	require.Contains(t, rec.Detail, "crashed")
	require.Equal(t, req.RequestID, rec.Headers[jetstream.MsgIDHeader][0], "original headers kept")
	require.EqualValues(t, 1, b.quarantined())
	require.EqualValues(t, 0, b.msgs(schemas.DefaultAdvisoryStream), "advisory acked")
}

// N replicas capturing the same advisory at once store one record, and
// none of them fails on the message another already removed.
func TestCaptureByManyReplicasIsIdempotent(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	ack, err := consumers.PublishRequest(ctx(t), b.js, b.topo, schemas.NewRequest("t1", "main", "tester"))
	require.NoError(t, err)
	adv := advisory.Advisory{Stream: b.topo.RequestsStream, Consumer: "personaq-tester", StreamSeq: ack.Sequence, Deliveries: 5, Time: time.Now()}
	var wg sync.WaitGroup
	results := make([]advisory.Captured, 4)
	for i := range results {
		l := newListener(t, b, b.nats.JetStream(t))
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := l.Capture(ctx(t), adv)
			require.NoError(t, err)
			results[i] = c
		}()
	}
	wg.Wait()
	require.EqualValues(t, 1, b.quarantined())
	require.EqualValues(t, 0, b.msgs(b.topo.RequestsStream))
	stored := 0
	for _, c := range results {
		if !c.Gone && !c.Duplicate {
			stored++
		}
	}
	require.Equal(t, 1, stored, "one replica stored it; the others found it stored or gone: %+v", results)

	again, err := newListener(t, b, b.js).Capture(ctx(t), adv)
	require.NoError(t, err)
	require.True(t, again.Gone, "a late advisory is a no-op")
}

// The sweep finds a message that reached MaxDeliver while no listener
// (and no advisory stream) existed, and leaves consumers with work in
// flight alone.
func TestSweepCapturesMessagesTheAdvisoryMissed(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	specs := []consumers.ConsumerSpec{
		{Persona: "stuck", AckWait: 200 * time.Millisecond, MaxAckPending: 10, MaxDeliver: 2},
		{Persona: "busy", AckWait: time.Minute, MaxAckPending: 10, MaxDeliver: 2},
	}
	require.NoError(t, consumers.Provision(ctx(t), b.js, b.topo, specs))
	stuckReq := schemas.NewRequest("t-stuck", "main", "stuck")
	_, err := consumers.PublishRequest(ctx(t), b.js, b.topo, stuckReq)
	require.NoError(t, err)
	_, err = consumers.PublishRequest(ctx(t), b.js, b.topo, schemas.NewRequest("t-busy", "main", "busy"))
	require.NoError(t, err)

	stuck, err := b.js.Consumer(ctx(t), b.topo.RequestsStream, consumers.Durable("stuck"))
	require.NoError(t, err)
	for range 2 { // two deliveries, never acked
		m, err := stuck.Next(jetstream.FetchMaxWait(5 * time.Second))
		require.NoError(t, err)
		_ = m
	}
	// A replica still pulling makes the server give up on the message.
	batch, err := stuck.Fetch(1, jetstream.FetchMaxWait(500*time.Millisecond))
	require.NoError(t, err)
	for range batch.Messages() {
		t.Fatal("a message past MaxDeliver was delivered")
	}
	busy, err := b.js.Consumer(ctx(t), b.topo.RequestsStream, consumers.Durable("busy"))
	require.NoError(t, err)
	_, err = busy.Next(jetstream.FetchMaxWait(5 * time.Second)) // in flight
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := stuck.Info(ctx(t))
		return err == nil && info.NumAckPending == 0
	}, 10*time.Second, 20*time.Millisecond, "stuck message given up by the server")

	res, err := newListener(t, b, b.js).Sweep(ctx(t))
	require.NoError(t, err)
	require.Len(t, res.Captured, 1)
	require.Equal(t, []string{"personaq-busy: 1 messages awaiting an ack"}, res.Skipped)
	e, err := b.insp.Get(ctx(t), res.Captured[0].QuarantineSeq)
	require.NoError(t, err)
	require.Equal(t, schemas.ReasonMaxDeliveries, e.Record.Reason)
	require.Equal(t, stuckReq.RequestID, e.Record.RequestID)
	require.Contains(t, e.Record.Detail, "sweep")
	require.EqualValues(t, 1, b.msgs(b.topo.RequestsStream), "only the busy request is left")

	res, err = newListener(t, b, b.js).Sweep(ctx(t))
	require.NoError(t, err)
	require.Empty(t, res.Captured, "a second sweep is a no-op")
}

func TestListenerStopIsIdempotent(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	l := newListener(t, b, b.js)
	l.Stop() // before Start
	c, cancel := context.WithCancel(context.Background())
	require.NoError(t, l.Start(c))
	require.NoError(t, l.Start(c))
	cancel()
	l.Stop()
	l.Stop()
}
