package dlq

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// CompensationFunc runs one compensation (delete a branch, remove a
// worktree). A nil error — and only a nil error — marks the saga
// COMPENSATED. Errors are classified like handler errors
// (handlers.Terminal ends the retries at once); the context carries the
// attempt's timeout. A compensation may run more than once (retries, two
// sweepers at once, a sweep cut short), so it must be idempotent.
type CompensationFunc func(ctx context.Context, req *schemas.CompensationRequest) error

// SweeperConfig configures a Sweeper.
type SweeperConfig struct {
	// JetStream client. Required.
	JetStream jetstream.JetStream
	// Topology names the stream, consumer and saga bucket.
	// Default: CompensationTopology{}.WithDefaults().
	Topology CompensationTopology
	// Writer stores compensation_failed records. Default: a Writer on
	// DefaultQuarantinePrefix subjects.
	Writer *Writer
	// Handlers run compensations by kind. A saga whose kind has none is
	// quarantined (never left running).
	Handlers map[schemas.CompensationKind]CompensationFunc
	// Policy is the retry policy compensations run under.
	// Default: retry.LocalPolicy() (2 attempts, exponential 1s…).
	Policy retry.Policy
	// Policies overrides Policy by kind.
	Policies map[schemas.CompensationKind]retry.Policy
	// Interval between the sweeps of Start's loop. Default: 1m.
	Interval time.Duration
	// Logger for decisions. Default: none.
	Logger *zerolog.Logger
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

var kindRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

func (c SweeperConfig) validate() error {
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

// Sweeper runs pending saga compensations. A saga ends COMPENSATED
// only when its handler returned nil; when the handler fails for good
// (terminal error, or the policy's attempts spent) or no handler exists for
// its kind, it ends QUARANTINED with an operator-readable terminal reason
// naming the kind and target, and a compensation_failed quarantine record.
// It is never left RUNNING and never reported as compensated by mistake.
// A terminal saga is not touched again, so a second sweep is a no-op; one
// failing saga never stops the others.
type Sweeper struct {
	cfg  SweeperConfig
	topo CompensationTopology
	js   jetstream.JetStream
	w    *Writer
	log  zerolog.Logger
	now  func() time.Time
	lc   lifecycle
}

// NewSweeper validates cfg and returns a Sweeper.
func NewSweeper(cfg SweeperConfig) (*Sweeper, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Sweeper{cfg: cfg, topo: cfg.Topology.WithDefaults(), js: cfg.JetStream, w: cfg.Writer, log: zerolog.Nop(), now: cfg.Now}
	if s.w == nil {
		s.w = NewWriter(cfg.JetStream, QuarantineSubjects(DefaultQuarantinePrefix))
	}
	if cfg.Logger != nil {
		s.log = *cfg.Logger
	}
	s.log = s.log.With().Str("component", "compensations").Logger()
	if s.now == nil {
		s.now = time.Now
	}
	if s.cfg.Policy.MaxAttempts == 0 {
		s.cfg.Policy = retry.LocalPolicy()
	}
	if s.cfg.Interval == 0 {
		s.cfg.Interval = time.Minute
	}
	return s, nil
}

// Provision creates the compensation stream, consumer and saga bucket.
func (s *Sweeper) Provision(ctx context.Context) error {
	return ProvisionCompensations(ctx, s.js, s.topo)
}

// Report is the outcome of one sweep.
type Report struct {
	// Recovered lists the sagas compensated by this sweep.
	Recovered []string `json:"recovered"`
	// Errors has one entry per saga quarantined by this sweep (naming the
	// saga, the kind and target, and the error), and per compensation
	// message that was itself invalid.
	Errors []string `json:"errors"`
}

// Failed reports whether anything went wrong (a CLI exits non-zero).
func (r *Report) Failed() bool { return len(r.Errors) > 0 }

// Sweep takes in the pending compensation requests (each becomes a RUNNING
// saga), then runs the compensation of every RUNNING saga. It returns an
// error only when it could not sweep at all, or ctx ended (the report then
// holds what was done; an interrupted saga stays RUNNING for the next one).
func (s *Sweeper) Sweep(ctx context.Context) (*Report, error) {
	rep := &Report{Recovered: []string{}, Errors: []string{}}
	if err := ensureCompensations(ctx, s.js, s.topo); err != nil {
		return rep, err
	}
	kv, err := sagaBucket(ctx, s.js, s.topo, false)
	if err != nil {
		return rep, err
	}
	if err := s.intake(ctx, kv, rep); err != nil {
		return rep, err
	}
	keys, err := sagaKeys(ctx, kv)
	if err != nil {
		return rep, err
	}
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		sg, err := getSagaKey(ctx, kv, key)
		if errors.Is(err, ErrSagaNotFound) {
			continue
		}
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("saga key %s: %v", key, err))
			continue
		}
		switch {
		case sg.State == SagaRunning:
			s.compensate(ctx, kv, sg, rep)
		case sg.State == SagaQuarantined && sg.QuarantineSeq == 0:
			s.writeRecord(ctx, kv, sg) // finish an earlier sweep's record; not reported again
		}
	}
	return rep, ctx.Err()
}

func sagaKeys(ctx context.Context, kv jetstream.KeyValue) ([]string, error) {
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("list sagas: %w", err)
	}
	defer func() { _ = lister.Stop() }()
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

// Saga returns the recorded state of saga id (ErrSagaNotFound if none).
func (s *Sweeper) Saga(ctx context.Context, id string) (*Saga, error) {
	kv, err := sagaBucket(ctx, s.js, s.topo, false)
	if err != nil {
		return nil, err
	}
	return getSaga(ctx, kv, id)
}

// Sagas returns every recorded saga, by key.
func (s *Sweeper) Sagas(ctx context.Context) ([]*Saga, error) {
	kv, err := sagaBucket(ctx, s.js, s.topo, false)
	if err != nil {
		return nil, err
	}
	keys, err := sagaKeys(ctx, kv)
	if err != nil {
		return nil, err
	}
	out := make([]*Saga, 0, len(keys))
	for _, k := range keys {
		sg, err := getSagaKey(ctx, kv, k)
		if errors.Is(err, ErrSagaNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, sg)
	}
	return out, nil
}

// InFlight returns the sagas not yet terminal (RUNNING).
func (s *Sweeper) InFlight(ctx context.Context) ([]*Saga, error) {
	all, err := s.Sagas(ctx)
	return slices.DeleteFunc(all, func(sg *Saga) bool { return sg.State.Terminal() }), err
}

// Start sweeps every Interval in the background until ctx is done or Stop
// is called. Calling Start again is a no-op.
func (s *Sweeper) Start(ctx context.Context) error {
	if err := s.Provision(ctx); err != nil {
		return err
	}
	s.lc.start(ctx, nil, s.loop)
	return nil
}

// Stop ends the background sweeps and waits for the current one.
func (s *Sweeper) Stop() { s.lc.stop() }

func (s *Sweeper) loop(ctx context.Context) {
	for {
		rep, err := s.Sweep(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.log.Warn().Err(err).Msg("compensation sweep failed")
		} else if len(rep.Recovered)+len(rep.Errors) > 0 {
			s.log.Info().Strs("recovered", rep.Recovered).Strs("errors", rep.Errors).Msg("compensation sweep")
		}
		if !sleepCtx(ctx, s.cfg.Interval) {
			return
		}
	}
}

// kindPhrase names what a kind's failure is, for terminal reasons.
func kindPhrase(kind schemas.CompensationKind) string {
	switch kind {
	case schemas.CompensationDeleteBranch:
		return "branch deletion"
	case schemas.CompensationRemoveWorktree:
		return "worktree removal"
	}
	return strings.ToLower(strings.ReplaceAll(string(kind), "_", " ")) + " compensation"
}
