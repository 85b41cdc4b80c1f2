package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/personaq/personaq/consumers/tracing"
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Config configures a Client.
type Config struct {
	// JetStream client. Required.
	JetStream jetstream.JetStream
	// Topology names the streams. Default: wire.Topology{} with defaults
	// (what `personaq serve` uses unless configured otherwise).
	Topology wire.Topology
	// Logger receives the step-budget lines. Default: zerolog.Nop().
	Logger *zerolog.Logger
	// Presets resolves policy names a request carries. Default: retry.Preset.
	Presets func(name string) (retry.Policy, error)
	// RecordGrace is how long Run waits past the step deadline for the
	// request's deadline_exceeded record. Default: 5s.
	RecordGrace time.Duration
	// PersonaCacheTTL is how long a persona's policy, read from its
	// consumer, is reused before it is read again. Default: 10s; negative:
	// read on every call.
	PersonaCacheTTL time.Duration
	// TracerProvider makes the send span of each submit, whose trace
	// context the request carries to every attempt. Default: the global
	// provider (otel.GetTracerProvider).
	TracerProvider trace.TracerProvider
}

// Client submits persona requests and awaits their terminal records. It is
// safe for concurrent use.
type Client struct {
	js      jetstream.JetStream
	topo    wire.Topology
	log     zerolog.Logger
	presets func(string) (retry.Policy, error)
	grace   time.Duration
	cache   *personaCache
	records *wire.Outcomes
	submit  *wire.Submitter
	tracer  trace.Tracer
}

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.JetStream == nil {
		return nil, fmt.Errorf("%w: jetstream: required", ErrInvalidConfig)
	}
	if cfg.RecordGrace < 0 {
		return nil, fmt.Errorf("%w: record_grace: must not be negative", ErrInvalidConfig)
	}
	c := &Client{js: cfg.JetStream, topo: cfg.Topology.WithDefaults(), log: zerolog.Nop(), presets: cfg.Presets, grace: cfg.RecordGrace}
	if cfg.Logger != nil {
		c.log = *cfg.Logger
	}
	if c.presets == nil {
		c.presets = retry.Preset
	}
	if c.grace == 0 {
		c.grace = 5 * time.Second
	}
	ttl := cfg.PersonaCacheTTL
	if ttl == 0 {
		ttl = 10 * time.Second
	}
	c.cache = &personaCache{ttl: ttl, byName: map[string]cachedPersona{}}
	c.records = wire.NewOutcomes(c.js, c.topo)
	c.submit = wire.NewSubmitter(c.js, c.topo, c.records)
	c.tracer = tracing.Tracer(cfg.TracerProvider)
	return c, nil
}

// Submitted says where a request was stored.
type Submitted struct {
	RequestID string
	Stream    string
	Sequence  uint64
	// Duplicate: the same request (same id, same content) was already
	// submitted; nothing new was published, and Deadline is the first
	// submission's. The same id with other content is an error matching
	// ErrConflict instead.
	Duplicate bool
	// Deadline is the step deadline sent with the request (zero: none).
	Deadline time.Time
	// Digest is the request's content digest (schemas.RequestDigest).
	Digest string
}

type submitOptions struct {
	deadline  time.Time
	skipCheck bool
}

// SubmitOption configures Submit.
type SubmitOption func(*submitOptions)

// WithDeadline sends a step deadline with the request: past it the
// request is not run or retried any more and ends as deadline_exceeded.
func WithDeadline(t time.Time) SubmitOption { return func(o *submitOptions) { o.deadline = t } }

// SkipPersonaCheck publishes even when no replica serves the persona yet
// (the request waits in the stream; replicas quarantine it as
// unknown_persona after their grace period if none ever does).
func SkipPersonaCheck() SubmitOption { return func(o *submitOptions) { o.skipCheck = true } }

// Submit validates req and publishes it, deduplicated by request id, then
// publishes its queued attempt event. It refuses a persona no replica
// serves (naming those that are) and a policy name that does not resolve,
// unless SkipPersonaCheck. A request id already submitted with the same
// content is returned as that submission (Duplicate); with other content
// it is a *ConflictError matching ErrConflict.
func (c *Client) Submit(ctx context.Context, req *schemas.PersonaRequest, opts ...SubmitOption) (*Submitted, error) {
	var o submitOptions
	for _, opt := range opts {
		opt(&o)
	}
	if !o.skipCheck {
		if _, err := c.budget(ctx, req); err != nil {
			return nil, err
		}
	}
	return c.publish(ctx, req, o.deadline)
}

func (c *Client) publish(ctx context.Context, req *schemas.PersonaRequest, deadline time.Time) (*Submitted, error) {
	ctx, span := tracing.StartSend(ctx, c.tracer, c.topo.RequestSubject(req.Persona), req.RequestID,
		tracing.Persona.String(req.Persona), tracing.TaskID.String(req.TaskID), tracing.Step.String(req.Step))
	sub, err := c.submit.Submit(ctx, req, deadline)
	if err != nil {
		tracing.EndSend(span, tracing.Sent{}, err)
		return nil, err
	}
	tracing.EndSend(span, tracing.Sent{Stream: sub.Stream, Sequence: sub.Sequence, Duplicate: sub.Duplicate}, nil)
	return &Submitted{RequestID: req.RequestID, Stream: sub.Stream, Sequence: sub.Sequence, Duplicate: sub.Duplicate,
		Deadline: sub.Deadline, Digest: sub.Digest}, nil
}

// Budget returns the step budget req will run under: the served persona's
// policy with req's policy name and overrides applied.
func (c *Client) Budget(ctx context.Context, req *schemas.PersonaRequest) (retry.Budget, error) {
	return c.budget(ctx, req)
}

func (c *Client) budget(ctx context.Context, req *schemas.PersonaRequest) (retry.Budget, error) {
	info, err := c.cache.get(ctx, req.Persona, func(ctx context.Context) (wire.PersonaInfo, error) {
		return wire.LookupPersona(ctx, c.js, c.topo, req.Persona)
	})
	if err != nil {
		return retry.Budget{}, err
	}
	b, err := info.Budget(req, c.presets)
	if err != nil {
		return retry.Budget{}, fmt.Errorf("request %s: %w", req.RequestID, err)
	}
	return b, nil
}

// Run submits req with a step deadline computed from the persona's policy
// and awaits its terminal record until then (plus RecordGrace for the
// record that says the deadline passed). See the package doc.
func (c *Client) Run(ctx context.Context, req *schemas.PersonaRequest, opts ...AwaitOption) (*Result, error) {
	b, err := c.budget(ctx, req)
	if err != nil {
		return nil, err
	}
	logBudget(c.log, b, req)
	deadline := time.Now().Add(b.StepDeadline)
	sub, err := c.publish(ctx, req, deadline)
	if err != nil {
		return nil, err
	}
	if sub.Duplicate && !sub.Deadline.IsZero() {
		deadline = sub.Deadline // the first submission's budget stands
	}
	actx, cancel := context.WithDeadline(ctx, deadline.Add(c.grace))
	defer cancel()
	res, err := c.Await(actx, req.RequestID, opts...)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, fmt.Errorf("%w: request %s has no terminal record %s after its %s step budget", ErrStepDeadline, req.RequestID, c.grace, b.StepDeadline)
	}
	return res, err
}

// logBudget writes the two lines a workflow engine writes when it sizes a
// persona-request step to outlast its retries.
func logBudget(log zerolog.Logger, b retry.Budget, req *schemas.PersonaRequest) {
	retry.LogBudget(log.With().Str("task_id", req.TaskID).Str("request_id", req.RequestID).Logger(), b, req.Step)
}
