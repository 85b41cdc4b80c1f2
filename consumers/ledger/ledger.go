package ledger

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/personaq/personaq/consumers/rdb"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
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
	// Its dial/read/write timeouts bound every call: make it with
	// NewClient (or NewClientURL), which keeps a Redis outage to about
	// 2 s per call; a client built with go-redis's defaults can take 35 s.
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
	// lostError (LostAttemptError as a JSON string, for the begin script),
	// ttlArg and maxHistoryArg are script arguments made once: boxing a
	// string or an int per call allocates.
	lostError, ttlArg, maxHistoryArg any
	// begins and finishes batch the Begin and Finish calls of concurrent
	// callers, one pipe each: a batch of Finish calls in flight does not
	// hold the next Begin calls back, and redis-server, with appendfsync
	// always, covers what both connections sent in one event-loop pass
	// with one fsync. A caller's Begin returns before its Finish is sent,
	// so its calls keep their order.
	begins, finishes *pipe
}

// New returns a Ledger for cfg with defaults applied.
func New(cfg Config) (*Ledger, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	lost := quote(LostAttemptError)
	return &Ledger{
		cfg: cfg, lostError: lost, begins: newPipe(cfg.Client), finishes: newPipe(cfg.Client),
		ttlArg: cfg.TTL.Milliseconds(), maxHistoryArg: cfg.MaxHistory,
	}, nil
}

// Begun is what Begin found.
type Begun struct {
	// Done is set when the step already succeeded: the caller must not run
	// the handler again (a redelivery after a crash between side effect and
	// ack). Nothing else is set then and nothing was written.
	Done bool
	// DoneRequestID is the request id the successful Finish gave.
	DoneRequestID string
	// Busy is set when another attempt of the step holds a live lease (it
	// runs elsewhere right now): the caller must not run the handler. Nothing
	// else but BusyFor and BusyAttempt is set then, and nothing was written.
	Busy bool
	// BusyFor is how long that lease has left unless its holder renews it.
	BusyFor time.Duration
	// BusyAttempt is the number of the attempt holding the lease.
	BusyAttempt int
	// Lease fences the attempt just begun (Begin WithLease): Renew keeps it,
	// a fenced Finish checks it. Zero without a lease.
	Lease Lease
	// Fresh is set when the step had no ledger entry before this call (a new
	// request, or a ledger that lost its data: see Epoch and WithFloor).
	Fresh bool
	// Attempt is the number of the attempt just begun (1-based).
	Attempt int
	// Resumed is set when Attempt is the one an earlier call with the same
	// idempotency key opened (WithIdempotencyKey): that call ran in Redis,
	// its reply was lost.
	Resumed bool
	// History holds the step's earlier attempt records, oldest first,
	// including attempts recorded as lost by this call.
	History []retry.Attempt
	// Lost counts the attempts this call found begun but never finished and
	// recorded as lost (class retryable, error LostAttemptError).
	Lost int
	// Dropped counts older records MaxHistory has removed; History is
	// complete only when it is zero.
	Dropped int
	// Epoch is the ledger's epoch (see Epoch) as Begin WithEpochFloor read
	// it, whatever else is set; zero without that option.
	Epoch time.Time
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
	// Lease, when set, fences the Finish: it writes nothing and returns
	// ErrLeaseLost unless the attempt still holds this lease, which it then
	// gives up. Zero: unfenced.
	Lease Lease
}

// Lease is an attempt's hold on its step: while it lives no other Begin
// starts an attempt of the step. It expires on Redis's clock after the TTL
// given to Begin unless Renew extends it.
type Lease struct {
	// Key is the step.
	Key StepKey
	// Token is the fencing token: it grows with every lease of the step.
	Token int64
	// Attempt is the attempt number the lease was granted with.
	Attempt int
}

// IsZero reports whether l is no lease.
func (l Lease) IsZero() bool { return l.Token == 0 }

func (l Lease) value() string {
	if l.IsZero() {
		return ""
	}
	return strconv.FormatInt(l.Token, 10) + "|" + strconv.Itoa(l.Attempt)
}

// BeginOption changes how Begin starts an attempt.
type BeginOption func(*beginOptions)

type beginOptions struct {
	lease time.Duration
	floor int
	key   string
	// epochFloor: published (unix ms) and delivered of WithEpochFloor.
	epochFloor           bool
	published, delivered int64
}

// WithLease makes Begin grant the attempt a lease of ttl (at least 1ms) and
// refuse (Begun.Busy) while another attempt holds a live one.
func WithLease(ttl time.Duration) BeginOption {
	return func(o *beginOptions) { o.lease = max(ttl, time.Millisecond) }
}

// WithIdempotencyKey makes Begin calls with the same key one Begin: a call
// that finds the attempt an earlier call with this key opened still open
// (that call's reply was lost, to a connection cut or a Redis shutdown,
// after the script ran) returns that attempt again, under a new lease
// token, instead of recording it as lost and numbering the next one. The
// key must be unique to one try of one request (a delivery of its
// message, say), and may only be reused for calls whose answer the caller
// never got: the ledger cannot tell a reused key from a lost reply.
func WithIdempotencyKey(key string) BeginOption {
	return func(o *beginOptions) { o.key = key }
}

// WithFloor numbers the attempt at least n when the step has no entry: the
// caller knows at most n-1 attempts can have run (e.g. JetStream's delivery
// count of a message older than the ledger's Epoch), so a ledger that lost
// its data never hands out numbers already spent.
func WithFloor(n int) BeginOption {
	return func(o *beginOptions) { o.floor = n }
}

// WithEpochFloor reads the ledger's epoch (see Epoch) in the same round
// trip as Begin and returns it in Begun.Epoch; when the message was
// published before it and delivered before (delivered > 1), the attempt is
// numbered as WithFloor(delivered) numbers it. This is what a redelivery
// did with a call to Epoch before Begin (creating the epoch marker if
// missing), in one round trip instead of two. On Redis Cluster, where the
// epoch marker lives in another slot than the step, Begin still makes the
// two calls.
func WithEpochFloor(published time.Time, delivered int) BeginOption {
	return func(o *beginOptions) {
		o.epochFloor, o.published, o.delivered = true, published.UnixMilli(), int64(delivered)
	}
}

// epochFloorAt is the floor WithEpochFloor implies given the epoch (unix ms):
// the begin script's rule, for Cluster, where Go applies it.
func (o beginOptions) epochFloorAt(epoch int64) int {
	if o.delivered > 1 && o.published < epoch && int(o.delivered) > o.floor {
		return int(o.delivered)
	}
	return o.floor
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

// String says where the step stands, for people: "succeeded", "running
// attempt N" or "N attempt(s) recorded, not succeeded".
func (s State) String() string {
	switch {
	case s.Done:
		return "succeeded"
	case s.InFlight > 0:
		return fmt.Sprintf("running attempt %d", s.Attempts+1)
	}
	return fmt.Sprintf("%d attempt(s) recorded, not succeeded", s.Attempts)
}

// Begin starts an attempt of key's step in one atomic script. If the step
// has a completion marker it returns Begun{Done: true} and writes nothing;
// WithLease, if another attempt holds a live lease, it returns Begun{Busy:
// true} and writes nothing. Otherwise it records attempts earlier workers
// began and never finished as lost (with leases: those whose lease expired),
// takes the next attempt number (a number released by an uncounted Finish
// first), marks it in flight, grants its lease and refreshes the TTL. With
// WithIdempotencyKey, an attempt an earlier call with the same key opened
// is taken over instead (see there).
func (l *Ledger) Begin(ctx context.Context, key StepKey, requestID string, opts ...BeginOption) (Begun, error) {
	if err := key.validate(); err != nil {
		return Begun{}, err
	}
	var o beginOptions
	for _, opt := range opts {
		opt(&o)
	}
	var epoch time.Time
	if o.epochFloor {
		if _, cluster := l.cfg.Client.(*redis.ClusterClient); cluster {
			e, err := l.Epoch(ctx)
			if err != nil {
				return Begun{}, err
			}
			epoch, o.floor, o.epochFloor = e, o.epochFloorAt(e.UnixMilli()), false
		}
	}
	keys, args := l.beginCall(key, requestID, o)
	res, err := l.begins.run(ctx, beginScript, keys, args...).Slice()
	if err != nil {
		return Begun{}, l.wrap("begin "+key.String(), err)
	}
	b, err := parseBegun(key, res)
	if err != nil {
		return Begun{}, err
	}
	if o.epochFloor {
		if ms, _ := res[len(res)-1].(int64); ms > 0 {
			epoch = time.UnixMilli(ms)
		}
	}
	b.Epoch = epoch
	return b, nil
}

// beginCall returns the keys and arguments of Begin's script call (see
// scripts.go): with o.epochFloor, the epoch marker's key and the floor's
// inputs too.
func (l *Ledger) beginCall(key StepKey, requestID string, o beginOptions) ([]string, []any) {
	keys := l.keys(key)
	if o.epochFloor {
		keys = append(keys, epochKey(l.cfg.Prefix))
	}
	args := make([]any, 8, 10)
	args[0], args[1], args[2], args[3] = quote(requestID), l.cfg.Now().UnixMilli(), l.ttlArg, l.maxHistoryArg
	args[4], args[5], args[6], args[7] = l.lostError, o.lease.Milliseconds(), o.floor, o.key
	if o.epochFloor {
		args = append(args, o.published, o.delivered)
	}
	return keys, args
}

func parseBegun(key StepKey, res []any) (Begun, error) {
	bad := func() (Begun, error) {
		return Begun{}, fmt.Errorf("%w: begin %s: unexpected reply %v", ErrCorrupt, key, res)
	}
	// Every reply ends with the epoch, which Begin reads.
	if len(res) < 3 {
		return bad()
	}
	if _, ok := res[len(res)-1].(int64); !ok {
		return bad()
	}
	switch flag, _ := res[0].(int64); flag {
	case 1:
		id, ok := res[1].(string)
		if len(res) != 3 || !ok {
			return bad()
		}
		return Begun{Done: true, DoneRequestID: id}, nil
	case 2:
		pttl, ok1 := res[1].(int64)
		n, ok2 := res[2].(int64)
		if len(res) != 4 || !ok1 || !ok2 {
			return bad()
		}
		return Begun{Busy: true, BusyFor: time.Duration(max(pttl, 0)) * time.Millisecond, BusyAttempt: int(n)}, nil
	}
	if len(res) != 9 {
		return bad()
	}
	n, ok1 := res[1].(int64)
	lost, ok2 := res[2].(int64)
	recorded, ok3 := res[3].(int64)
	raw, ok4 := res[4].([]any)
	token, ok5 := res[5].(int64)
	fresh, ok6 := res[6].(int64)
	resumed, ok7 := res[7].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 {
		return bad()
	}
	hist := []retry.Attempt{}
	// A first attempt has no history. Not calling decodeRecords then keeps
	// its 776-byte frame off the caller's stack, which would otherwise
	// grow (a copy of the whole stack) on every request's goroutine.
	if len(raw) > 0 {
		var err error
		if hist, err = decodeRecords(raw); err != nil {
			return Begun{}, fmt.Errorf("begin %s: %w", key, err)
		}
	}
	b := Begun{
		Attempt: int(n),
		History: hist,
		Lost:    int(lost),
		Dropped: max(int(recorded)-len(hist), 0),
		Fresh:   fresh == 1,
		Resumed: resumed == 1,
	}
	if token > 0 {
		b.Lease = Lease{Key: key, Token: token, Attempt: int(n)}
	}
	return b, nil
}

// Renew extends every lease in leases by ttl, in one round trip (a
// pipeline of one script call per lease). errs[i] is nil when leases[i] is
// extended, matches ErrLeaseLost when it expired or another attempt holds
// it, and ErrUnavailable when Redis did not answer.
func (l *Ledger) Renew(ctx context.Context, leases []Lease, ttl time.Duration) []error {
	errs := make([]error, len(leases))
	if len(leases) == 0 {
		return errs
	}
	ms := max(ttl, time.Millisecond).Milliseconds()
	calls := make([]*rdb.Call, len(leases))
	for i, ls := range leases {
		calls[i] = &rdb.Call{Script: renewScript, Keys: []string{leaseKey(l.cfg.Prefix, ls.Key)}, Args: []any{ls.value(), ms}}
	}
	rdb.Pipeline(ctx, l.cfg.Client, calls)
	for i, c := range calls {
		n, err := c.Cmd.Int64()
		switch {
		case err != nil:
			errs[i] = l.wrap("renew lease of "+leases[i].Key.String(), err)
		case n != 1:
			errs[i] = fmt.Errorf("%w: renew %s attempt %d", ErrLeaseLost, leases[i].Key, leases[i].Attempt)
		}
	}
	return errs
}

// Epoch returns when the ledger's data set began: the first call creates a
// marker, and a Redis that lost everything (FLUSHALL, a restart without
// persistence) gets a new one. A message published before the epoch may
// have attempts the ledger no longer knows of.
func (l *Ledger) Epoch(ctx context.Context) (time.Time, error) {
	ms, err := epochScript.Run(ctx, l.cfg.Client, []string{epochKey(l.cfg.Prefix)}, l.cfg.Now().UnixMilli()).Int64()
	if err != nil {
		return time.Time{}, l.wrap("epoch", err)
	}
	return time.UnixMilli(ms), nil
}

// Finish records how attempt a of key's step ended, in one atomic script,
// and refreshes the TTL. a.Number must be the number Begin returned; a zero
// a.At is set to now. Error and feedback text longer than MaxErrorLen is
// truncated with a marker.
//
// A Finish for an attempt another Begin has meanwhile recorded as lost
// replaces (counted) or removes (uncounted) that lost record; a repeated
// counted Finish of a recorded attempt is a no-op. A fenced Finish
// (opts.Lease) of an attempt that lost its lease writes nothing and returns
// ErrLeaseLost.
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
	keys, args := l.finishCall(key, a.Number, opts, rec, now)
	status, err := l.finishes.run(ctx, finishScript, keys, args...).Text()
	if err != nil {
		return l.wrap("finish "+key.String()+" attempt "+strconv.Itoa(a.Number), err)
	}
	if status == "stale" {
		return fmt.Errorf("%w: finish %s attempt %d (token %d)", ErrLeaseLost, key, a.Number, opts.Lease.Token)
	}
	return nil
}

// finishCall returns the keys and arguments of Finish's script call (see
// scripts.go) for attempt number n, whose encoded record is rec.
func (l *Ledger) finishCall(key StepKey, n int, opts FinishOptions, rec string, now time.Time) ([]string, []any) {
	return l.keys(key), []any{
		n,
		flag(opts.Counted),
		flag(opts.Succeeded),
		rec,
		opts.RequestID,
		now.UnixMilli(),
		l.ttlArg,
		l.maxHistoryArg,
		opts.Lease.value(),
	}
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
		return nil, State{}, l.wrap("history "+key.String(), err)
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
	return l.wrap("ping", l.cfg.Client.Ping(ctx).Err())
}

func (l *Ledger) keys(k StepKey) []string { return stepKeys(l.cfg.Prefix, k) }

// quote returns s as a JSON string, as json.Marshal writes it: the begin
// script stores the request id so. A plain id (a UUID) is quoted in one
// allocation.
func quote(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return string(schemas.AppendString(make([]byte, 0, len(s)+8), s))
		}
	}
	return `"` + s + `"`
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
