package consumers

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/personaq/personaq/consumers/flow"
	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/loop"
	"github.com/personaq/personaq/consumers/ratelog"
	"github.com/personaq/personaq/consumers/saga"
	"github.com/personaq/personaq/consumers/streams"
	"github.com/personaq/personaq/consumers/tracing"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Persona is one persona this replica serves.
type Persona struct {
	// Name is the persona (subject token). Required.
	Name string
	// Handler runs its attempts. Required.
	Handler handlers.Handler
	// Policy is the persona's retry policy; MaxAttempts and AttemptTimeout
	// are required. Requests may name a preset and override fields.
	Policy retry.Policy
	// Concurrency is how many of its handlers this replica runs at once.
	// A request whose handler returned gives its slot to the next one
	// while its terminal record is stored and its ack sent; up to
	// 3 × Concurrency more requests are held so. Default: 16.
	Concurrency int
	// MaxReplicas sizes the shared MaxAckPending (Concurrency × MaxReplicas):
	// a smaller value silently caps replicas. Default: 4.
	MaxReplicas int
	// AckWait for the durable consumer. Default: the longest attempt timeout
	// the policy allows plus 5s (heartbeats keep longer work alive anyway).
	AckWait time.Duration
	// MaxDeliver is the crash-loop safety net: the server's last delivery
	// of a request is quarantined as max_deliveries without running, so it
	// must be more than the policy's MaxAttempts. Default: 50.
	MaxDeliver int
	// Limiter names the shared rate limiter (Config.Limiter) every pull of
	// this persona takes permits from. Default: none.
	Limiter string
	// Circuit is the persona's circuit breaker (needs Config.Circuits).
	// Default: off.
	Circuit flow.Circuit
}

// Defaults of Persona and Config (the subscriber's where it applies them).
const (
	DefaultConcurrency  = transport.DefaultSlots
	DefaultMaxReplicas  = 4
	DefaultDrainTimeout = transport.DefaultDrainTimeout
	DefaultFetchMaxWait = transport.DefaultFetchMaxWait
)

// Config configures a Runtime.
type Config struct {
	// JetStream client. Required.
	JetStream jetstream.JetStream
	// Topology names streams and subjects. Default: Topology{}.WithDefaults().
	Topology Topology
	// Personas served by this replica. Required (at least one).
	Personas []Persona
	// Ledger counts attempts and keeps their history (Redis; build one with
	// ledger.New on ledger.NewClient). Required unless WithoutLedger.
	Ledger Ledger
	// WithoutLedger runs with no ledger, on purpose: attempts are counted
	// by JetStream deliveries, and there is no attempt history, so no
	// plateau detection, no feedback to the next attempt, no attempt
	// leases and no usage budget across replicas. For tests and demos;
	// `personaq serve` refuses it.
	WithoutLedger bool
	// HandlerMiddleware wraps every persona's handler, first listed
	// outermost: logging, authentication to the provider, tracing of the
	// handler's own calls. A middleware sees each attempt's request and
	// result; its error is classified like the handler's.
	HandlerMiddleware []func(handlers.Handler) handlers.Handler
	// Logger for decisions. Default: zerolog.Nop().
	Logger *zerolog.Logger
	// DrainTimeout bounds graceful shutdown of in-flight work: attempts
	// still running then are released uncounted and their contexts
	// cancelled, and Run waits up to 10s more for their handlers to
	// return; a delivery that reaches its handler only after that is
	// released unrun. Default: 30s.
	DrainTimeout time.Duration
	// FetchMaxWait bounds one pull request. Default: 1s.
	FetchMaxWait time.Duration
	// Presets resolves policy names that requests carry. Default: retry.Preset.
	Presets func(name string) (retry.Policy, error)
	// Now is the clock of a request's life: attempt and record times,
	// durations, the step deadline and the delays computed from it.
	// Leases, heartbeats and settle confirmations keep the real clock,
	// because the server's AckWait does. Default: time.Now.
	Now func() time.Time
	// Observer receives measurements (Prometheus metrics). Default: none.
	Observer Observer
	// UnknownPersonaGrace is how long a request on a subject no replica
	// serves waits before the replicas quarantine it as unknown_persona
	// (`persona ls` shows such requests meanwhile). Default: 5m; negative:
	// never.
	UnknownPersonaGrace time.Duration
	// NoAttemptEvents turns off attempt events (started, failed) on the
	// attempts stream. Default: published.
	NoAttemptEvents bool
	// Compensations run saga compensation requests by kind; with none, this
	// replica runs no compensations (`personaq compensate sweep` can).
	Compensations map[schemas.CompensationKind]saga.Func
	// TracerProvider makes the spans of every delivery (see package
	// tracing). Default: the global provider (otel.GetTracerProvider).
	TracerProvider trace.TracerProvider
	// Limiter holds the shared rate limits personas name (Persona.Limiter).
	// Required when a persona names one.
	Limiter *flow.Limiter
	// Circuits shares circuit states between replicas. Required when a
	// persona has a circuit breaker.
	Circuits *flow.Circuits
	// ReplicaID names this replica to the others (which one holds a
	// circuit's half-open probe). Default: host name and a random suffix.
	ReplicaID string
}

// Runtime runs persona requests from JetStream through the retry pipeline.
type Runtime struct {
	cfg      Config
	js       jetstream.JetStream
	topo     Topology
	log      zerolog.Logger
	ledger   Ledger
	dlq      *dlq.Writer
	outcomes *Outcomes
	// plainAck: the requests stream has limits retention (durability.go).
	plainAck bool
	personas map[string]*personaRuntime
	presets  func(string) (retry.Policy, error)
	now      func() time.Time
	health   health
	obs      Observer
	leases   *leaseKeeper
	cancels  *cancelWatch
	attempts attemptGroup // one per handler running apart (invokeApart)
	// retried: the deliveries this replica gave back for a retry it holds
	// itself, whose successors skip a redelivery's lookups (ownretry.go).
	retried ownRetries
	// site: where the requests stream is stored; without a ledger,
	// retries are remembered only on the standalone server holding it.
	site storeSite
	// leadMax is the most a retry's message is asked back early
	// (retryLead); retryLeadMax but in tests.
	leadMax time.Duration
	tracer  trace.Tracer
	// replicaID names this replica in the shared circuit states.
	replicaID string
	// beginKeys is random and this Runtime's own: the prefix of its Begin
	// calls' idempotency keys (beginKey).
	beginKeys string
	// backlogEvery, a test hook, is how often the runnable backlog is
	// measured (0: backlogInterval).
	backlogEvery time.Duration
	// epoch is when the ledger's data set began (unix ms; 0: unknown).
	epoch atomic.Int64
	// frozen, a test hook, suppresses heartbeats and lease renewals: what a
	// replica stopped by SIGSTOP or a long pause looks like to the others.
	frozen atomic.Bool
	// quiet rate-limits the warnings an outage repeats.
	quiet *ratelog.Limiter
	// crashAt, a test hook, is the quarantine step (quarantineStep) at which
	// the next delivery reaching it is abandoned unsettled; 0: none.
	crashAt atomic.Int32
}

// newWriter builds the quarantine writer for the runtime's topology.
func (r *Runtime) newWriter(extra ...dlq.WriterOption) *dlq.Writer {
	opts := append([]dlq.WriterOption{
		dlq.WithDuplicateWindow(r.topo.DuplicateWindow),
		dlq.WithIndexReplicas(r.topo.Replicas, r.topo.Storage), dlq.WithWriterLogger(&r.log),
		dlq.WithLeaderWait(streams.LeaderWait),
	}, extra...)
	return dlq.NewWriter(r.js, r.topo.QuarantineSubject, opts...)
}

type personaRuntime struct {
	name   string
	handle handlerFunc // the handler's Handle: the Func itself for a handlers.Func
	policy retry.Policy
	slots  int
	spec   ConsumerSpec
	// flow is its flow control (nil: no limiter, no circuit breaker).
	flow *personaFlow
	// queueWaits is set once a request of it ran under a queue wait (its
	// own override or preset): the queue-wait scan reads its requests too.
	queueWaits atomic.Bool
	// plain is policy as the requests that override nothing run under it.
	plain plainPolicy
	// spans are its span names.
	spans spanNames
}

// New validates cfg and builds a Runtime.
func New(cfg Config) (*Runtime, error) {
	if err := validate(cfg); err != nil {
		return nil, err
	}
	r := &Runtime{
		cfg: cfg, js: cfg.JetStream, topo: cfg.Topology.WithDefaults(), ledger: cfg.Ledger,
		personas: map[string]*personaRuntime{}, presets: cfg.Presets, now: cfg.Now,
	}
	r.log = zerolog.Nop()
	if cfg.Logger != nil {
		r.log = *cfg.Logger
	}
	if r.presets == nil {
		r.presets = retry.Preset
	}
	if r.now == nil {
		r.now = time.Now
	}
	r.leadMax = retryLeadMax
	r.obs = cfg.Observer
	if r.obs == nil {
		r.obs = nopObserver{}
	}
	r.tracer = tracing.Tracer(cfg.TracerProvider)
	r.quiet = ratelog.New(0)
	r.dlq = r.newWriter()
	r.outcomes = newOutcomes(r.js, r.topo)
	r.cancels = newCancelWatch(r.js, r.topo, r.log)
	if r.ledger != nil {
		r.leases = newLeaseKeeper(r.ledger, &r.frozen, func(a *attemptLease, why string) {
			a.log.Warn().Int("attempt", a.attempt).Str("why", why).Dur("lease_ttl", a.ttl).Msg("lease lost; attempt cancelled, its delivery settles nothing")
		})
	}
	r.replicaID = cfg.ReplicaID
	if r.replicaID == "" {
		r.replicaID = newReplicaID()
	}
	r.beginKeys = newBeginKeys()
	for _, p := range cfg.Personas {
		for i := len(cfg.HandlerMiddleware) - 1; i >= 0; i-- {
			p.Handler = cfg.HandlerMiddleware[i](p.Handler)
		}
		pr := newPersonaRuntime(p)
		pr.spans = newSpanNames(r.topo.RequestSubject(p.Name))
		pr.flow = r.newPersonaFlow(p, pr)
		addFlowMetadata(pr.spec.Metadata, p)
		r.personas[p.Name] = pr
	}
	return r, nil
}

func validate(cfg Config) error {
	if cfg.JetStream == nil {
		return fmt.Errorf("%w: jetstream: required", ErrInvalidConfig)
	}
	if cfg.Ledger == nil && !cfg.WithoutLedger {
		return fmt.Errorf("%w: ledger: required (attempt limits across replicas, history, plateau detection); set WithoutLedger to count attempts by deliveries alone", ErrInvalidConfig)
	}
	if l, ok := cfg.Ledger.(*ledger.Ledger); ok && l == nil {
		return fmt.Errorf("%w: ledger: a nil *ledger.Ledger; leave Ledger unset (with WithoutLedger) or give an opened one", ErrInvalidConfig)
	}
	if cfg.Ledger != nil && cfg.WithoutLedger {
		return fmt.Errorf("%w: ledger: set together with WithoutLedger; give one or the other", ErrInvalidConfig)
	}
	if len(cfg.Personas) == 0 {
		return fmt.Errorf("%w: personas: at least one is required", ErrInvalidConfig)
	}
	seen := map[string]bool{}
	for i, p := range cfg.Personas {
		if err := validatePersona(p); err != nil {
			return fmt.Errorf("%w: personas[%d]: %w", ErrInvalidConfig, i, err)
		}
		if err := validateFlow(cfg, p); err != nil {
			return fmt.Errorf("%w: personas[%d]: %s: %w", ErrInvalidConfig, i, p.Name, err)
		}
		if seen[p.Name] {
			return fmt.Errorf("%w: personas[%d].name: duplicate %q", ErrInvalidConfig, i, p.Name)
		}
		seen[p.Name] = true
	}
	return cfg.Topology.WithDefaults().Validate()
}

func validatePersona(p Persona) error {
	switch {
	case p.Name == "":
		return errors.New("name: required")
	case p.Handler == nil:
		return fmt.Errorf("%s: handler: required", p.Name)
	case p.Concurrency < 0 || p.MaxReplicas < 0 || p.AckWait < 0:
		return fmt.Errorf("%s: concurrency, max_replicas and ack_wait must not be negative", p.Name)
	}
	if err := p.Policy.Validate(); err != nil {
		return fmt.Errorf("%s: policy: %w", p.Name, err)
	}
	return nil
}

// handlerFunc is a handler's Handle.
type handlerFunc = func(context.Context, *handlers.Request) (handlers.Result, error)

// handleFunc is what runs h: a handlers.Func is called as itself, not
// through its Handle method, one frame fewer under every parked handler
// (see invokeApart).
func handleFunc(h handlers.Handler) handlerFunc {
	if f, ok := h.(handlers.Func); ok {
		return f
	}
	if h == nil { // stage tests build personas without one
		return nil
	}
	return h.Handle
}

func newPersonaRuntime(p Persona) *personaRuntime {
	if p.Concurrency == 0 {
		p.Concurrency = DefaultConcurrency
	}
	if p.MaxReplicas == 0 {
		p.MaxReplicas = DefaultMaxReplicas
	}
	pol := p.Policy.WithDefaults()
	if p.AckWait == 0 {
		p.AckWait = time.Duration(float64(pol.AttemptTimeout)*pol.ExtendedTimeoutFactor) + 5*time.Second
	}
	return &personaRuntime{name: p.Name, handle: handleFunc(p.Handler), policy: p.Policy, slots: p.Concurrency, spec: ConsumerSpec{
		Persona: p.Name, AckWait: p.AckWait, MaxAckPending: p.Concurrency * p.MaxReplicas, MaxDeliver: p.MaxDeliver,
		Metadata: wire.PersonaInfoOf(p.Name, p.Policy).Metadata(),
	}}
}

// Provision creates the streams and this replica's persona consumers.
func (r *Runtime) Provision(ctx context.Context) error {
	specs := make([]ConsumerSpec, 0, len(r.personas))
	for _, p := range r.personas {
		specs = append(specs, p.spec)
	}
	return Provision(ctx, r.js, r.topo, specs)
}

// Run provisions, then consumes until ctx is done, then drains: in-flight
// attempts get DrainTimeout to finish and the rest are released.
func (r *Runtime) Run(ctx context.Context) error {
	// Every loop Run starts has ended when it returns: none writes to the
	// logger (or anything else of the caller's) after Run. A loop's panic
	// drains the replica, and Run panics with it once drained.
	ctx, cancel := context.WithCancel(ctx)
	loops := loop.Group{OnPanic: func(p *loop.PanicError) {
		r.log.Error().Err(p).Msg("a background loop panicked; the replica drains and stops")
		cancel()
	}}
	defer cancel()
	if err := r.Provision(ctx); err != nil {
		return err
	}
	if r.ledger == nil { // read where the requests are stored before the first retry needs it
		r.site.here(r.js, r.topo, 0, time.Now())
	}
	stopDurability, err := r.startDurability(ctx)
	if err != nil {
		return err
	}
	defer stopDurability()
	if r.ledger != nil {
		ectx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		r.health.ledgerResult(r.refreshEpoch(ectx))
		cancel()
	}
	stopCancels, err := r.cancels.start(ctx)
	if err != nil {
		return fmt.Errorf("cancel notices: %w", err)
	}
	defer stopCancels()
	router, subs, err := r.router(ctx)
	if err != nil {
		return err
	}
	stopBackground, err := r.background(ctx)
	if err != nil {
		return err
	}
	defer stopBackground()
	drained := make(chan struct{})
	loops.Start(ctx, r.loops(router, subs, drained)...)
	// Stopped (and waited for) before the terminal-record batches and the
	// cancel notices their passes use are.
	defer loops.Stop()
	defer r.health.bound.Store(false)
	r.log.Info().Int("personas", len(r.personas)).Bool("ledger", r.ledger != nil).Msg("personaq runtime started")
	if r.ledger == nil {
		r.log.Warn().Msg("running without an attempt ledger: attempts counted by deliveries alone, no history, plateau detection or attempt leases")
	}
	err = router.Run(ctx)
	cancel() // the router stopped (or never started): so does everything else
	<-drained
	r.waitAttempts(attemptsGrace)
	r.log.Info().Msg("personaq runtime stopped")
	return err
}

// attemptsGrace is how long Run waits, once drained, for handlers still
// running: each was released at the drain's hard stop and its context
// cancelled; one that ignores it is left behind (and logged), as the
// router leaves a handler past its close timeout.
const attemptsGrace = 10 * time.Second

// waitAttempts waits up to grace for the handlers' goroutines to return;
// from then on no handler starts (see notStarted).
func (r *Runtime) waitAttempts(grace time.Duration) {
	select {
	case <-r.attempts.close():
	case <-time.After(grace):
		r.log.Warn().Dur("waited", grace).Msg("handlers still running after the drain: their messages were released; they are left behind")
	}
}

// finishingPerSlot: a persona replica keeps up to this many requests per
// worker slot whose handler has returned while their terminal records are
// stored and their settles sent (process frees the slot when the handler
// returns). Their records then share atomic batches: on R1 file storage a
// batch has a fixed cost of several milliseconds, so records queued behind
// a commit in flight are what make it pay (BENCHMARKS.md).
const finishingPerSlot = 3

// router builds the router and binds each persona's subscriber to its
// consumer first: a consumer that cannot be bound fails Run here, before
// the router runs (a router whose handler fails to subscribe leaves the
// others unstarted, and goroutines waiting for them).
func (r *Runtime) router(ctx context.Context) (*message.Router, []*transport.Subscriber, error) {
	drain := r.cfg.DrainTimeout
	if drain == 0 {
		drain = DefaultDrainTimeout
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: drain + 10*time.Second}, watermill.NopLogger{})
	if err != nil {
		return nil, nil, err
	}
	var subs []*transport.Subscriber
	for _, p := range r.personas {
		sub, err := transport.NewSubscriber(transport.Config{
			JetStream: r.js, Stream: r.topo.RequestsStream, Slots: p.slots, Finishing: finishingPerSlot * p.slots,
			FetchMaxWait: r.cfg.FetchMaxWait, DrainTimeout: drain, HoldUnder: holdUnder, Logger: &r.log,
			PlainAck: r.plainAck, StaleSettle: r.countStale, Frozen: &r.frozen, Gate: r.gateFor(p), TypedSettleOnly: true,
		})
		if err != nil {
			return nil, nil, err
		}
		if err := sub.Bind(ctx, p.name); err != nil {
			return nil, nil, err
		}
		subs = append(subs, sub)
		router.AddConsumerHandler("persona-"+p.name, p.name, sub, r.process)
	}
	return router, subs, nil
}

// Ready reports whether the replica can do work: its consumers are bound
// and the ledger (when used) answers. NATS connectivity is the caller's
// connection to check.
func (r *Runtime) Ready() error {
	if !r.health.bound.Load() {
		return ErrNotRunning
	}
	if r.health.ledgerDown.Load() {
		return ledger.ErrUnavailable
	}
	return nil
}

// leaseInterval is how often the lease keeper renews: a third of the
// shortest lease any persona uses.
func (r *Runtime) leaseInterval() time.Duration {
	shortest := time.Duration(0)
	for _, p := range r.personas {
		if ttl := leaseTTL(p.spec.AckWait); shortest == 0 || ttl < shortest {
			shortest = ttl
		}
	}
	return leaseInterval(shortest)
}

// countStale counts a settle the subscriber refused to a lapsed claim.
func (r *Runtime) countStale(persona, op string) {
	if o, ok := r.obs.(FenceObserver); ok {
		o.StaleSettle(persona, op)
	}
}
