package saga_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/saga"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/integration/testenv"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// bundle is one test's setup: a JetStream server with personaq's streams
// provisioned, a quarantine writer and an inspector.
type bundle struct {
	t    *testing.T
	nats *testenv.NATS
	js   jetstream.JetStream
	topo saga.Topology
	w    *dlq.Writer
	insp *dlq.Inspector
	log  zerolog.Logger
}

func newBundle(t *testing.T) *bundle {
	t.Helper()
	n := testenv.StartNATS(t)
	b := &bundle{t: t, nats: n, js: n.JetStream(t)}
	b.log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	topo := consumers.Topology{}.WithDefaults()
	require.NoError(t, consumers.Provision(ctx(t), b.js, topo, nil))
	b.w = dlq.NewWriter(b.js, topo.QuarantineSubject, dlq.WithDuplicateWindow(topo.DuplicateWindow), dlq.WithWriterLogger(&b.log))
	var err error
	b.insp, err = dlq.NewInspector(dlq.InspectorConfig{JetStream: b.js})
	require.NoError(t, err)
	return b
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// fastPolicy is LocalPolicy's shape (2 attempts) with millisecond waits.
func fastPolicy() retry.Policy {
	return retry.Policy{Name: "test", MaxAttempts: 2, AttemptTimeout: 2 * time.Second, Schedule: retry.Fixed{Every: 10 * time.Millisecond}}
}

func (b *bundle) runner(h map[schemas.CompensationKind]saga.Func, pol ...retry.Policy) *saga.Runner {
	b.t.Helper()
	return b.runnerOn(b.js, h, pol...)
}

func (b *bundle) runnerOn(js jetstream.JetStream, h map[schemas.CompensationKind]saga.Func, pol ...retry.Policy) *saga.Runner {
	b.t.Helper()
	p := fastPolicy()
	if len(pol) > 0 {
		p = pol[0]
	}
	r, err := saga.NewRunner(saga.Config{JetStream: js, Topology: b.topo, Writer: b.w, Handlers: h, Policy: p, Logger: &b.log})
	require.NoError(b.t, err)
	return r
}

// sweep runs one sweep that must finish within 10 s.
func (b *bundle) sweep(r *saga.Runner) *saga.Report {
	b.t.Helper()
	rep, err := r.Sweep(ctx(b.t), 10*time.Second)
	require.NoError(b.t, err)
	require.Empty(b.t, rep.Retrying)
	return rep
}

func (b *bundle) compensation(id string, kind schemas.CompensationKind, target string) *schemas.CompensationRequest {
	b.t.Helper()
	req := &schemas.CompensationRequest{SchemaVersion: schemas.Version, RequestID: uuid.NewString(), SagaID: id,
		Kind: kind, Target: target, TaskID: "task-" + id, CreatedAt: time.Now().UTC()}
	_, sg, err := saga.Publish(ctx(b.t), b.js, b.topo, req)
	require.NoError(b.t, err)
	require.Equal(b.t, saga.Running, sg.State)
	return req
}

func (b *bundle) saga(id string) *saga.Saga {
	b.t.Helper()
	sg, err := saga.Get(ctx(b.t), b.js, b.topo, id)
	require.NoError(b.t, err)
	return sg
}

func (b *bundle) compensationRecords() []dlq.Entry {
	b.t.Helper()
	es, err := b.insp.List(ctx(b.t), dlq.Filter{Reasons: []schemas.Reason{schemas.ReasonCompensationFailed}})
	require.NoError(b.t, err)
	return es
}

// consumer is the compensation consumer's state.
func (b *bundle) consumer() *jetstream.ConsumerInfo {
	b.t.Helper()
	c, err := b.js.Consumer(ctx(b.t), schemas.DefaultCompensationsStream, schemas.DefaultCompensationsDurable)
	require.NoError(b.t, err)
	info, err := c.Info(ctx(b.t))
	require.NoError(b.t, err)
	return info
}

// calls records compensation calls by saga, with their times.
type calls struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (c *calls) wrap(f saga.Func) saga.Func {
	return func(ctx context.Context, req *schemas.CompensationRequest) error {
		c.mu.Lock()
		if c.at == nil {
			c.at = map[string][]time.Time{}
		}
		c.at[req.SagaID] = append(c.at[req.SagaID], time.Now())
		c.mu.Unlock()
		return f(ctx, req)
	}
}

func (c *calls) n(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.at[id])
}

func (c *calls) times(id string) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.at[id]...)
}

// reapBranch fails for protected branches, like a reap_branch compensation.
func reapBranch(_ context.Context, req *schemas.CompensationRequest) error {
	if req.Target == "loop/42" {
		return errors.New("protected branch")
	}
	return nil
}

func succeed(context.Context, *schemas.CompensationRequest) error { return nil }
