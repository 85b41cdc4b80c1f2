package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/personaq/personaq/retry"
)

// Defaults applied by New.
const (
	DefaultPrefix      = "personaq"
	DefaultTTL         = 7 * 24 * time.Hour
	DefaultMaxErrorLen = 2048
	DefaultMaxHistory  = 50
)

// Config configures a Ledger.
type Config struct {
	// Client is a plain, Sentinel (failover) or Cluster client. Required.
	// Its dial/read/write timeouts bound every call.
	Client redis.UniversalClient
	// Prefix starts every key; it must not contain '{' or '}'.
	// Default: "personaq".
	Prefix string
	// TTL of a step's keys, refreshed on every write. Default: 7 days.
	TTL time.Duration
	// MaxErrorLen bounds the stored error and feedback text in bytes; longer
	// text is cut and marked "…[truncated N of M bytes]". Default: 2048.
	MaxErrorLen int
	// MaxHistory is how many attempt records a step keeps, newest last.
	// Older ones are dropped, and State.Dropped/Begun.Dropped say how many.
	// Default: 50.
	MaxHistory int
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.MaxErrorLen == 0 {
		c.MaxErrorLen = DefaultMaxErrorLen
	}
	if c.MaxHistory == 0 {
		c.MaxHistory = DefaultMaxHistory
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: client: required", ErrInvalidConfig)
	case strings.ContainsAny(c.Prefix, "{}"):
		return fmt.Errorf("%w: prefix: must not contain '{' or '}' (they would break the Cluster hash tag), got %q", ErrInvalidConfig, c.Prefix)
	case c.TTL < time.Millisecond:
		return fmt.Errorf("%w: ttl: must be at least 1ms, got %s", ErrInvalidConfig, c.TTL)
	case c.MaxErrorLen < 1:
		return fmt.Errorf("%w: max_error_len: must be positive, got %d", ErrInvalidConfig, c.MaxErrorLen)
	case c.MaxHistory < 1:
		return fmt.Errorf("%w: max_history: must be positive, got %d", ErrInvalidConfig, c.MaxHistory)
	}
	return nil
}

// Ledger is the per task-step attempt ledger. It is safe for concurrent use
// by many goroutines and many replicas: every call is one Lua script.
type Ledger struct {
	cfg Config
	// lostError is LostAttemptError as a JSON string, for the begin script.
	lostError string
}

// New returns a Ledger for cfg with defaults applied.
func New(cfg Config) (*Ledger, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	lost, _ := json.Marshal(LostAttemptError)
	return &Ledger{cfg: cfg, lostError: string(lost)}, nil
}

// Begun is what Begin found.
type Begun struct {
	// Done is set when the step already succeeded: the caller must not run
	// the handler again (a redelivery after a crash between side effect and
	// ack). Nothing else is set then and nothing was written.
	Done bool
	// DoneRequestID is the request id the successful Finish gave.
	DoneRequestID string
	// Attempt is the number of the attempt just begun (1-based).
	Attempt int
	// History holds the step's earlier attempt records, oldest first,
	// including attempts recorded as lost by this call.
	History []retry.Attempt
	// Lost counts the attempts this call found begun but never finished and
	// recorded as lost (class retryable, error LostAttemptError).
	Lost int
	// Dropped counts older records MaxHistory has removed; History is
	// complete only when it is zero.
	Dropped int
}

// FinishOptions says how Finish treats an attempt.
type FinishOptions struct {
	// Counted records the attempt and keeps its number spent. When false
	// (a snooze, or an attempt released by shutdown or an infrastructure
	// fault) nothing is recorded and the number is handed out again by the
	// next Begin, so no attempt is burned.
	Counted bool
	// Succeeded sets the step's completion marker: every later Begin returns
	// Done.
	Succeeded bool
	// RequestID identifies the request; stored in the record and the marker.
	RequestID string
}

// State summarises a step's ledger for inspection.
type State struct {
	// Attempts counts the attempts recorded (finished and counted, or lost),
	// including records MaxHistory dropped.
	Attempts int
	// InFlight counts attempts begun and not yet finished.
	InFlight int
	// Dropped counts records MaxHistory removed.
	Dropped int
	// Done reports the completion marker, set by the successful request
	// DoneRequestID at DoneAt.
	Done          bool
	DoneRequestID string
	DoneAt        time.Time
	// TTL is the time left before the step's keys expire; zero when the
	// step has no ledger entry.
	TTL time.Duration
}

// Begin starts an attempt of key's step in one atomic script. If the step
// has a completion marker it returns Begun{Done: true} and writes nothing.
// Otherwise it records attempts earlier workers began and never finished as
// lost, takes the next attempt number (a number released by an uncounted
// Finish first), marks it in flight and refreshes the TTL.
func (l *Ledger) Begin(ctx context.Context, key StepKey, requestID string) (Begun, error) {
	if err := key.validate(); err != nil {
		return Begun{}, err
	}
	reqJSON, _ := json.Marshal(requestID)
	res, err := beginScript.Run(ctx, l.cfg.Client, l.keys(key),
		string(reqJSON),
		l.cfg.Now().UnixMilli(),
		l.cfg.TTL.Milliseconds(),
		l.cfg.MaxHistory,
		l.lostError,
	).Slice()
	if err != nil {
		return Begun{}, wrap("begin "+key.String(), err)
	}
	return parseBegun(key, res)
}

func parseBegun(key StepKey, res []any) (Begun, error) {
	bad := func() (Begun, error) {
		return Begun{}, fmt.Errorf("%w: begin %s: unexpected reply %v", ErrCorrupt, key, res)
	}
	if len(res) < 2 {
		return bad()
	}
	if flag, _ := res[0].(int64); flag == 1 {
		id, ok := res[1].(string)
		if !ok {
			return bad()
		}
		return Begun{Done: true, DoneRequestID: id}, nil
	}
	if len(res) != 5 {
		return bad()
	}
	n, ok1 := res[1].(int64)
	lost, ok2 := res[2].(int64)
	recorded, ok3 := res[3].(int64)
	raw, ok4 := res[4].([]any)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return bad()
	}
	hist, err := decodeRecords(raw)
	if err != nil {
		return Begun{}, fmt.Errorf("begin %s: %w", key, err)
	}
	return Begun{
		Attempt: int(n),
		History: hist,
		Lost:    int(lost),
		Dropped: max(int(recorded)-len(hist), 0),
	}, nil
}

// Finish records how attempt a of key's step ended, in one atomic script,
// and refreshes the TTL. a.Number must be the number Begin returned; a zero
// a.At is set to now. Error and feedback text longer than MaxErrorLen is
// truncated with a marker.
//
// A Finish for an attempt another Begin has meanwhile recorded as lost
// replaces (counted) or removes (uncounted) that lost record; a repeated
// counted Finish of a recorded attempt is a no-op.
func (l *Ledger) Finish(ctx context.Context, key StepKey, a retry.Attempt, opts FinishOptions) error {
	if err := key.validate(); err != nil {
		return err
	}
	if a.Number < 1 {
		return fmt.Errorf("%w: attempt number must be at least 1, got %d", ErrInvalidArgument, a.Number)
	}
	now := l.cfg.Now()
	if a.At.IsZero() {
		a.At = now
	}
	rec, err := encodeRecord(a, opts.RequestID, l.cfg.MaxErrorLen)
	if err != nil {
		return err
	}
	err = finishScript.Run(ctx, l.cfg.Client, l.keys(key),
		a.Number,
		flag(opts.Counted),
		flag(opts.Succeeded),
		rec,
		opts.RequestID,
		now.UnixMilli(),
		l.cfg.TTL.Milliseconds(),
		l.cfg.MaxHistory,
	).Err()
	return wrap("finish "+key.String()+" attempt "+strconv.Itoa(a.Number), err)
}

// History returns key's attempt records, oldest first, and its state, for
// inspection (`personaq task show`). It writes nothing. A step without a
// ledger entry returns no records and a zero State.
func (l *Ledger) History(ctx context.Context, key StepKey) ([]retry.Attempt, State, error) {
	if err := key.validate(); err != nil {
		return nil, State{}, err
	}
	res, err := historyScript.Run(ctx, l.cfg.Client, l.keys(key)).Slice()
	if err != nil {
		return nil, State{}, wrap("history "+key.String(), err)
	}
	bad := func() ([]retry.Attempt, State, error) {
		return nil, State{}, fmt.Errorf("%w: history %s: unexpected reply %v", ErrCorrupt, key, res)
	}
	if len(res) != 7 {
		return bad()
	}
	recorded, ok1 := res[0].(int64)
	open, ok2 := res[1].(int64)
	done, ok3 := res[2].(int64)
	doneID, ok4 := res[3].(string)
	doneAt, ok5 := res[4].(int64)
	pttl, ok6 := res[5].(int64)
	raw, ok7 := res[6].([]any)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 {
		return bad()
	}
	hist, err := decodeRecords(raw)
	if err != nil {
		return nil, State{}, fmt.Errorf("history %s: %w", key, err)
	}
	st := State{
		Attempts:      int(recorded),
		InFlight:      int(open),
		Dropped:       max(int(recorded)-len(hist), 0),
		Done:          done == 1,
		DoneRequestID: doneID,
	}
	if st.Done {
		st.DoneAt = time.UnixMilli(doneAt).UTC()
	}
	if pttl > 0 {
		st.TTL = time.Duration(pttl) * time.Millisecond
	}
	return hist, st, nil
}

// Ping checks that Redis answers, for readiness. Its error matches
// ErrUnavailable when Redis cannot be reached.
func (l *Ledger) Ping(ctx context.Context) error {
	return wrap("ping", l.cfg.Client.Ping(ctx).Err())
}

func (l *Ledger) keys(k StepKey) []string {
	return []string{metaKey(l.cfg.Prefix, k), attemptsKey(l.cfg.Prefix, k)}
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
