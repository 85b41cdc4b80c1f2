package consumers_test

import (
	"context"
	"fmt"
	"io"
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

// harness is one test's bundle: a JetStream server, optionally a Redis
// ledger, and helpers to run replicas and read what they produced.
type harness struct {
	t      *testing.T
	nats   *testenv.NATS
	js     jetstream.JetStream
	ledger consumers.Ledger
	topo   wire.Topology
	// logTo, when set, receives the replicas' logs instead of the test log.
	logTo io.Writer
}

func newHarness(t *testing.T, withLedger bool) *harness {
	t.Helper()
	n := testenv.StartNATS(t)
	h := &harness{t: t, nats: n, js: n.JetStream(t), topo: wire.Topology{}.WithDefaults()}
	require.NoError(t, consumers.Provision(setupCtx(t), h.js, h.topo, nil))
	if withLedger {
		r := testenv.StartRedis(t)
		l, err := ledger.New(ledger.Config{Client: r.Client(t)})
		require.NoError(t, err)
		_, err = l.Epoch(context.Background()) // the ledger is older than every message, as deployed
		require.NoError(t, err)
		h.ledger = l
	}
	return h
}

// setupCtx bounds a setup call (provisioning streams and consumers) by
// what a loaded machine needs instead of the JetStream client's 5 s
// default API timeout, which a consumer creation overran under -race at
// load average 5 ("provision …: context deadline exceeded").
func setupCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// fastPolicy retries quickly so tests take milliseconds.
func fastPolicy(attempts int) retry.Policy {
	return retry.Policy{
		Name: "test", MaxAttempts: attempts, AttemptTimeout: 2 * time.Second,
		Schedule: retry.Linear{Step: 50 * time.Millisecond}, NetworkDelay: 50 * time.Millisecond,
	}
}

type replica struct {
	rt     *consumers.Runtime
	cancel context.CancelFunc
	done   chan error
}

// start runs one replica serving the given personas until the test ends.
func (h *harness) start(personas ...consumers.Persona) *replica {
	h.t.Helper()
	return h.startMod(nil, personas...)
}

// startMod is start with a chance to change the replica's Config.
func (h *harness) startMod(mod func(*consumers.Config), personas ...consumers.Persona) *replica {
	h.t.Helper()
	return h.startArmed(mod, nil, personas...)
}

// startArmed is startMod with a chance to arm the runtime's test hooks
// before it runs.
func (h *harness) startArmed(mod func(*consumers.Config), arm func(*consumers.Runtime), personas ...consumers.Persona) *replica {
	h.t.Helper()
	var w io.Writer = zerolog.NewTestWriter(h.t)
	if h.logTo != nil {
		w = h.logTo
	}
	log := zerolog.New(w).Level(zerolog.InfoLevel)
	cfg := consumers.Config{
		JetStream: h.js, Personas: personas, Ledger: h.ledger, WithoutLedger: h.ledger == nil, Logger: &log,
		DrainTimeout: 2 * time.Second, FetchMaxWait: 200 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	rt, err := consumers.New(cfg)
	require.NoError(h.t, err)
	if arm != nil {
		arm(rt)
	}
	require.NoError(h.t, rt.Provision(setupCtx(h.t)))
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{rt: rt, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- rt.Run(ctx) }()
	h.t.Cleanup(r.stop)
	return r
}

// stop cancels the replica and waits for its drain.
func (r *replica) stop() {
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		panic("replica did not stop within 30s")
	}
	r.done <- nil // let a second stop return at once
}

func (h *harness) publish(persona, task string, mutate ...func(*schemas.PersonaRequest)) *schemas.PersonaRequest {
	h.t.Helper()
	req := schemas.NewRequest(task, "main", persona)
	for _, m := range mutate {
		m(req)
	}
	_, err := wire.PublishRequest(context.Background(), h.js, h.topo, req)
	require.NoError(h.t, err)
	return req
}

// outcomes collects outcome events by request id.
type outcomes struct {
	mu   sync.Mutex
	byID map[string]*schemas.OutcomeEvent
	all  []*schemas.OutcomeEvent
}

func (h *harness) watchOutcomes() *outcomes {
	h.t.Helper()
	o := &outcomes{byID: map[string]*schemas.OutcomeEvent{}}
	cons, err := h.js.OrderedConsumer(context.Background(), h.topo.OutcomesStream, jetstream.OrderedConsumerConfig{})
	require.NoError(h.t, err)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		ev, err := schemas.DecodeOutcome(m.Data())
		if err != nil {
			return
		}
		o.mu.Lock()
		o.byID[ev.RequestID] = ev
		o.all = append(o.all, ev)
		o.mu.Unlock()
	})
	require.NoError(h.t, err)
	h.t.Cleanup(cc.Stop)
	return o
}

// wait returns the outcome of request id, failing after timeout.
func (o *outcomes) wait(t *testing.T, id string, timeout time.Duration) *schemas.OutcomeEvent {
	t.Helper()
	var ev *schemas.OutcomeEvent
	require.Eventually(t, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		ev = o.byID[id]
		return ev != nil
	}, timeout, 10*time.Millisecond, "no outcome for request %s", id)
	return ev
}

func (o *outcomes) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.all)
}

// quarantined reads the quarantine record stored at seq.
func (h *harness) quarantined(seq uint64) *schemas.QuarantineRecord {
	h.t.Helper()
	s, err := h.js.Stream(context.Background(), h.topo.QuarantineStream)
	require.NoError(h.t, err)
	raw, err := s.GetMsg(context.Background(), seq)
	require.NoError(h.t, err)
	rec, err := schemas.DecodeQuarantineRecord(raw.Data)
	require.NoError(h.t, err)
	return rec
}

// requestsLeft is how many requests are not settled yet.
func (h *harness) requestsLeft() uint64 {
	h.t.Helper()
	n, err := consumers.Unsettled(context.Background(), h.js, h.topo)
	require.NoError(h.t, err)
	return n
}

// calls records every handler invocation.
type calls struct {
	mu  sync.Mutex
	log []call
}

type call struct {
	task     string
	attempt  int
	agent    string
	at       time.Time
	feedback []string
	replica  string
}

func (c *calls) add(req *handlers.Request, replica string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, call{task: req.Message.TaskID, attempt: req.Attempt, agent: req.Agent,
		at: time.Now(), feedback: req.Feedback, replica: replica})
}

func (c *calls) forTask(task string) []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []call
	for _, x := range c.log {
		if x.task == task {
			out = append(out, x)
		}
	}
	return out
}

func persona(name string, h handlers.Handler, p retry.Policy) consumers.Persona {
	return consumers.Persona{Name: name, Handler: h, Policy: p, Concurrency: 8}
}

func failing(class func(error) error, format string) handlers.Handler {
	return handlers.Func(func(_ context.Context, req *handlers.Request) (handlers.Result, error) {
		return handlers.Result{}, class(fmt.Errorf(format, req.Attempt))
	})
}
