package saga

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers/loop"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/dlq"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// Func runs one compensation (delete a branch, remove a worktree). A nil
// error — and only a nil error — marks the saga COMPENSATED. Errors are
// classified like handler errors (handlers.Terminal ends the retries at
// once, handlers.After asks for a delay); the context carries the attempt's
// timeout. A compensation may run more than once (retries, a runner that
// stopped mid-attempt), so it must be idempotent.
type Func func(ctx context.Context, req *schemas.CompensationRequest) error

// Config configures a Runner.
type Config struct {
	// JetStream client. Required.
	JetStream jetstream.JetStream
	// Topology names the stream, consumer and saga bucket.
	// Default: Topology{}.WithDefaults().
	Topology Topology
	// Writer stores compensation_failed and invalid_message records.
	// Default: a dlq.Writer on schemas.DefaultQuarantinePrefix subjects.
	Writer *dlq.Writer
	// Handlers run compensations by kind. A saga whose kind has none is
	// quarantined (never left running).
	Handlers map[schemas.CompensationKind]Func
	// Policy is the retry policy compensations run under.
	// Default: retry.LocalPolicy() (2 attempts, exponential 1s…).
	Policy retry.Policy
	// Policies overrides Policy by kind.
	Policies map[schemas.CompensationKind]retry.Policy
	// Logger for decisions. Default: none.
	Logger *zerolog.Logger
	// Now is the clock of saga and record times. Default: time.Now.
	Now func() time.Time
}

var kindRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

func (c Config) validate() error {
	if c.JetStream == nil {
		return fmt.Errorf("%w: jetstream: required", ErrInvalidConfig)
	}
	for kind, h := range c.Handlers {
		if !kindRE.MatchString(string(kind)) || h == nil {
			return fmt.Errorf("%w: handlers: kind %q needs an UPPER_SNAKE name and a handler", ErrInvalidConfig, kind)
		}
	}
	if c.Policy.MaxAttempts != 0 {
		if err := c.Policy.Validate(); err != nil {
			return fmt.Errorf("%w: policy: %w", ErrInvalidConfig, err)
		}
	}
	for kind, p := range c.Policies {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("%w: policies[%s]: %w", ErrInvalidConfig, kind, err)
		}
	}
	return nil
}

// Runner runs saga compensations, one delivery of a compensation request
// per attempt. A saga ends COMPENSATED only when its handler returned nil.
// A failed attempt is classified and decided by the retry policy on the
// saga's recorded history: a retry is the request's redelivery after the
// policy's delay (NakWithDelay; nothing sleeps in process), a stop (terminal
// error, attempts spent, no handler for the kind) ends the saga QUARANTINED
// with an operator-readable reason naming the kind and target and one
// compensation_failed record carrying the attempt history. A delivery for a
// terminal saga is settled without running, so re-running is a no-op; one
// failing saga never stops the others. A Runner runs one compensation at a
// time; runners sharing the consumer (replicas, a CLI sweep) share the work.
type Runner struct {
	cfg  Config
	topo Topology
	js   jetstream.JetStream
	w    *dlq.Writer
	log  zerolog.Logger
	now  func() time.Time

	loops loop.Group
}

// NewRunner validates cfg and returns a Runner.
func NewRunner(cfg Config) (*Runner, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, topo: cfg.Topology.WithDefaults(), js: cfg.JetStream, w: cfg.Writer, log: zerolog.Nop(), now: cfg.Now}
	if r.w == nil {
		r.w = dlq.NewWriter(cfg.JetStream, dlq.QuarantineSubjects(schemas.DefaultQuarantinePrefix))
	}
	if cfg.Logger != nil {
		r.log = *cfg.Logger
	}
	r.log = r.log.With().Str("component", "compensations").Logger()
	if r.now == nil {
		r.now = time.Now
	}
	if r.cfg.Policy.MaxAttempts == 0 {
		r.cfg.Policy = retry.LocalPolicy()
	}
	return r, nil
}

// policy is the retry policy of kind, with defaults.
func (r *Runner) policy(kind schemas.CompensationKind) retry.Policy {
	if p, ok := r.cfg.Policies[kind]; ok {
		return p.WithDefaults()
	}
	return r.cfg.Policy.WithDefaults()
}

// Start consumes compensation requests in the background until ctx is done
// or Stop is called. Calling Start again is a no-op.
func (r *Runner) Start(ctx context.Context) error {
	if err := Provision(ctx, r.js, r.topo); err != nil {
		return err
	}
	r.loops.Start(ctx, r.consume)
	return nil
}

// Stop ends the background loop and waits for it; a compensation it was
// running is cut short and its request handed back without counting an
// attempt. Stop is idempotent and safe before Start.
func (r *Runner) Stop() { r.loops.Stop() }

// pollWait bounds one pull of a sweep: how late it sees ctx's end.
const pollWait = time.Second

// consume runs deliveries until ctx ends.
func (r *Runner) consume(ctx context.Context) {
	for ctx.Err() == nil {
		err := r.subscribe(ctx)
		if ctx.Err() == nil {
			r.log.Warn().Err(err).Msg("compensation runner: cannot consume; retrying in 5s")
			loop.Sleep(ctx, 5*time.Second)
		}
	}
}

// errSubscriptionEnded: the compensation subscription closed while the
// runner still ran.
var errSubscriptionEnded = errors.New("compensation subscription ended")

// subscribe runs the requests the shared transport delivers, one at a
// time, until ctx ends. Its subscriber heartbeats the request being run
// and hands back, at ctx's end, one fetched and not yet run.
func (r *Runner) subscribe(ctx context.Context) error {
	q, err := r.open(ctx)
	if err != nil {
		return err
	}
	sub, err := transport.NewSubscriber(transport.Config{
		JetStream: r.js, Stream: r.topo.Stream, Slots: 1, Logger: &r.log, TypedSettleOnly: true, KeepMsg: true,
		Consumer: func(string) string { return r.topo.Durable },
		// A retry is the request's redelivery after the policy's delay:
		// nothing is held in process.
		HoldUnder: -1,
	})
	if err != nil {
		return err
	}
	defer func() { _ = sub.Close() }()
	requests, err := sub.Subscribe(ctx, "compensations")
	if err != nil {
		return err
	}
	for wm := range requests {
		d, ok := transport.DeliveryFrom(wm.Context())
		if !ok { // not from a Subscriber: cannot happen
			wm.Nack()
			continue
		}
		q.handle(ctx, &delivery{raw: d.Msg, wm: wm})
	}
	return errSubscriptionEnded
}

// queue is an open compensation consumer and saga bucket.
type queue struct {
	r    *Runner
	cons jetstream.Consumer
	kv   jetstream.KeyValue
	beat time.Duration
}

func (r *Runner) open(ctx context.Context) (*queue, error) {
	cons, kv, err := ensure(ctx, r.js, r.topo)
	if err != nil {
		return nil, err
	}
	beat := r.topo.AckWait / 3
	if info := cons.CachedInfo(); info != nil && info.Config.AckWait > 0 {
		beat = info.Config.AckWait / 3
	}
	return &queue{r: r, cons: cons, kv: kv, beat: beat}, nil
}

// pull fetches at most one request, waiting up to wait, and handles it. A
// request fetched after ctx ended is handed back at once.
func (q *queue) pull(ctx context.Context, wait time.Duration, note func(outcome)) (int, error) {
	batch, err := q.cons.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		return 0, fmt.Errorf("fetch compensations: %w", err)
	}
	n := 0
	for m := range batch.Messages() {
		n++
		if ctx.Err() != nil {
			_ = m.Nak()
			continue
		}
		note(q.handle(ctx, &delivery{raw: m}))
	}
	if err := batch.Error(); err != nil && ctx.Err() == nil {
		return n, fmt.Errorf("fetch compensations: %w", err)
	}
	return n, nil
}
