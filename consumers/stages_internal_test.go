package consumers

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers/ledger"
	"github.com/personaq/personaq/consumers/ratelog"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// The stages of one delivery (process) run here without any server: a
// Runtime with no JetStream, a fake ledger, and a fixed clock.

var stageNow = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)

func stagePolicy() retry.Policy {
	return retry.Policy{Name: "stage", MaxAttempts: 3, AttemptTimeout: time.Second,
		Schedule: retry.Linear{Step: time.Second}, NetworkDelay: time.Second}
}

// stageRuntime is a Runtime for stage tests: persona "p" with h, l as its
// ledger (nil: none).
func stageRuntime(t *testing.T, h handlers.Handler, l Ledger) *Runtime {
	t.Helper()
	r := &Runtime{
		cfg: Config{NoAttemptEvents: true}, log: zerolog.Nop(), ledger: l, presets: retry.Preset,
		now: func() time.Time { return stageNow }, obs: nopObserver{}, personas: map[string]*personaRuntime{},
		quiet: ratelog.New(0),
	}
	if l != nil {
		r.leases = newLeaseKeeper(l, &r.frozen, func(*attemptLease, string) {})
	}
	r.personas["p"] = newPersonaRuntime(Persona{Name: "p", Handler: h, Policy: stagePolicy()})
	return r
}

// stageRuntimeLedger is stageRuntime with no handler and, when withLedger,
// a fake ledger.
func stageRuntimeLedger(t *testing.T, withLedger bool) *Runtime {
	t.Helper()
	var l Ledger
	if withLedger {
		l = &fakeLedger{}
	}
	return stageRuntime(t, nil, l)
}

func stageState(r *Runtime, delivered uint64) *attemptState {
	return &attemptState{persona: r.personas["p"], log: fixedLog(zerolog.Nop()), started: stageNow,
		delivery: &transport.Delivery{Stream: "S", Sequence: 7, Delivered: delivered, Received: stageNow}}
}

func requestMsg(t *testing.T, mutate func(*schemas.PersonaRequest), meta map[string]string) *message.Message {
	t.Helper()
	req := schemas.NewRequest("task-1", "main", "p")
	if mutate != nil {
		mutate(req)
	}
	data, err := schemas.Encode(req)
	require.NoError(t, err)
	msg := message.NewMessage("m-1", data)
	for k, v := range meta {
		msg.Metadata.Set(k, v)
	}
	return msg
}

func TestDecodeStage(t *testing.T) {
	t.Parallel()
	deadline := func(d time.Time) map[string]string {
		return map[string]string{schemas.HeaderDeadline: d.Format(time.RFC3339Nano)}
	}
	cases := []struct {
		name   string
		msg    func(t *testing.T) *message.Message
		done   bool
		reason schemas.Reason
	}{
		{"valid request passes on", func(t *testing.T) *message.Message { return requestMsg(t, nil, nil) }, false, ""},
		{"not JSON", func(*testing.T) *message.Message { return message.NewMessage("m", []byte("{")) }, true, schemas.ReasonInvalidMessage},
		{"another persona than the subject's", func(t *testing.T) *message.Message {
			return requestMsg(t, func(q *schemas.PersonaRequest) { q.Persona = "other" }, nil)
		}, true, schemas.ReasonInvalidMessage},
		{"deadline header not a time", func(t *testing.T) *message.Message {
			return requestMsg(t, nil, map[string]string{schemas.HeaderDeadline: "soon"})
		}, true, schemas.ReasonInvalidMessage},
		{"unknown policy preset", func(t *testing.T) *message.Message {
			return requestMsg(t, func(q *schemas.PersonaRequest) { q.Policy = "no-such-preset" }, nil)
		}, true, schemas.ReasonTerminal},
		{"deadline passed", func(t *testing.T) *message.Message { return requestMsg(t, nil, deadline(stageNow.Add(-time.Second))) },
			true, schemas.ReasonDeadlineExceeded},
		{"deadline ahead", func(t *testing.T) *message.Message { return requestMsg(t, nil, deadline(stageNow.Add(time.Hour))) }, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := stageRuntime(t, nil, nil)
			st := stageState(r, 1)
			end, done := r.decode(c.msg(t), st)
			require.Equal(t, c.done, done)
			if !done {
				require.NotNil(t, st.req)
				require.Equal(t, 3, st.policy.MaxAttempts)
				return
			}
			require.Equal(t, verdictQuarantine, end.verdict)
			require.Equal(t, c.reason, end.decision.Reason)
		})
	}
}

// invoke runs the invoke stage on the caller's goroutine, as invokeApart
// does on the attempt's: startInvoke, the handler (a panic recovered as
// its terminal outcome), endInvoke.
func (r *Runtime) invoke(ctx context.Context, st *attemptState) ran {
	c := r.startInvoke(ctx, st)
	func() {
		defer func() { r.handlerPanicked(c, recover()) }()
		c.out.result, c.out.err = c.st.persona.handle(c.ctx, c.req)
	}()
	r.endInvoke(c)
	return c.out
}

// decided runs invoke and decide on a decoded request with attempt number
// n, returning the ending.
func decided(t *testing.T, h handlers.Func, n int, ctx context.Context, mutate func(*attemptState)) (ending, *attemptState) {
	t.Helper()
	r := stageRuntime(t, h, nil)
	st := stageState(r, uint64(n))
	_, done := r.decode(requestMsg(t, nil, nil), st)
	require.False(t, done)
	st.attempt.Number = n
	if mutate != nil {
		mutate(st)
	}
	return r.decide(ctx, st, r.invoke(ctx, st)), st
}

func TestDecideStage(t *testing.T) {
	t.Parallel()
	ok := func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{Output: []byte(`"done"`)}, nil
	}
	fail := func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{}, errors.New("provider 502")
	}
	terminal := func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{}, handlers.Terminal(errors.New("bad prompt"))
	}
	panics := func(context.Context, *handlers.Request) (handlers.Result, error) { panic("boom") }
	overrun := func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
		<-ctx.Done()
		return handlers.Result{}, errors.New("gave up")
	}
	cases := []struct {
		name    string
		h       handlers.Func
		attempt int
		verdict verdict
		class   retry.Class
		reason  schemas.Reason
		delay   time.Duration
	}{
		{"success acks with the output", ok, 1, verdictAck, retry.ClassSucceeded, "", 0},
		{"retryable failure retries after the schedule's delay", fail, 1, verdictRetry, retry.ClassRetryable, "", time.Second},
		{"retryable failure on the last attempt quarantines", fail, 3, verdictQuarantine, retry.ClassRetryable, schemas.ReasonExhausted, 0},
		{"terminal failure quarantines at once", terminal, 1, verdictQuarantine, retry.ClassTerminal, schemas.ReasonTerminal, 0},
		{"a panic is terminal", panics, 1, verdictQuarantine, retry.ClassTerminal, schemas.ReasonTerminal, 0},
		{"an overrun is a timeout", overrun, 1, verdictRetry, retry.ClassTimeout, "", time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			end, st := decided(t, c.h, c.attempt, context.Background(), nil)
			require.Equal(t, c.verdict, end.verdict)
			require.Equal(t, c.class, st.attempt.Class)
			require.Equal(t, c.reason, end.decision.Reason)
			if c.verdict == verdictRetry {
				require.Equal(t, c.delay, end.delay, "the delay commit applies is the decision's")
				require.True(t, end.decision.Counted)
			}
			if c.verdict == verdictAck {
				require.Equal(t, `"done"`, string(end.output))
			}
		})
	}
}

func TestDecideStageUncountedEndings(t *testing.T) {
	t.Parallel()
	fail := func(ctx context.Context, _ *handlers.Request) (handlers.Result, error) {
		return handlers.Result{}, errors.New("interrupted")
	}
	t.Run("shutdown releases without counting", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(transport.ErrShuttingDown)
		end, st := decided(t, fail, 1, ctx, nil)
		require.Equal(t, verdictRelease, end.verdict)
		require.Zero(t, end.delay)
		require.False(t, end.decision.Counted)
		require.Equal(t, retry.ClassSnooze, st.attempt.Class)
	})
	t.Run("a lost lease settles nothing", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(transport.ErrLeaseLost)
		end, _ := decided(t, fail, 1, ctx, nil)
		require.Equal(t, verdictFenced, end.verdict)
	})
	t.Run("a retry past the step deadline ends the request", func(t *testing.T) {
		end, _ := decided(t, fail, 1, context.Background(), func(st *attemptState) {
			st.deadline = stageNow.Add(500 * time.Millisecond) // the retry would start in 1s
		})
		require.Equal(t, verdictQuarantine, end.verdict)
		require.Equal(t, schemas.ReasonDeadlineExceeded, end.decision.Reason)
		require.True(t, end.decision.Counted)
	})
}

// fakeLedger answers Begin with begun (or err) and records Finish calls.
type fakeLedger struct {
	Ledger
	begun    ledger.Begun
	err      error
	finished []ledger.FinishOptions
}

func (f *fakeLedger) Begin(context.Context, ledger.StepKey, string, ...ledger.BeginOption) (ledger.Begun, error) {
	return f.begun, f.err
}

func (f *fakeLedger) Finish(_ context.Context, _ ledger.StepKey, _ retry.Attempt, o ledger.FinishOptions) error {
	f.finished = append(f.finished, o)
	return f.err
}

func TestBeginStage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		begun    ledger.Begun
		err      error
		done     bool
		verdict  verdict
		reason   schemas.Reason
		finishes int
	}{
		{"a fresh attempt runs", ledger.Begun{Attempt: 1, Fresh: true}, nil, false, 0, "", 0},
		// Held, asking again every second, until the delivery's context ends
		// (a shutdown): then released uncounted.
		{"Redis down holds, released uncounted at shutdown", ledger.Begun{}, ledger.ErrUnavailable, true, verdictRelease, "", 0},
		{"running elsewhere releases until its lease ends", ledger.Begun{Busy: true, BusyFor: 3 * time.Second}, nil, true, verdictRelease, "", 0},
		{"attempts spent quarantines, giving the claimed one back", ledger.Begun{Attempt: 4}, nil, true, verdictQuarantine, schemas.ReasonExhausted, 1},
		{"ended by its last recorded attempt quarantines unrun", ledger.Begun{Attempt: 2, History: []retry.Attempt{
			{Number: 1, Class: retry.ClassTerminal, Error: "bad prompt"}}}, nil, true, verdictQuarantine, schemas.ReasonTerminal, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := &fakeLedger{begun: c.begun, err: c.err}
			r := stageRuntime(t, nil, l)
			st := stageState(r, 1)
			_, done := r.decode(requestMsg(t, nil, nil), st)
			require.False(t, done)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			end, done := r.begin(ctx, st)
			require.Equal(t, c.done, done)
			require.Len(t, l.finished, c.finishes)
			for _, o := range l.finished {
				require.False(t, o.Counted, "an attempt claimed but not run is given back uncounted")
			}
			if !done {
				require.Equal(t, c.begun.Attempt, st.attempt.Number)
				require.NotNil(t, st.lease)
				return
			}
			require.Equal(t, c.verdict, end.verdict)
			require.Equal(t, c.reason, end.decision.Reason)
			if c.verdict == verdictRelease {
				if c.err == nil { // a shutdown releases at once, to another replica
					require.Positive(t, end.delay)
				}
				require.False(t, end.decision.Counted)
			}
		})
	}
}

// commit records an attempt that ran in the ledger, counted; a lease found
// lost by the ledger turns the ending into settling nothing.
func TestCommitRecordsTheAttempt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		err     error
		verdict verdict
		settled settleOp
	}{
		{"recorded", nil, verdictRetry, settledRetry},
		{"lease lost: fenced", ledger.ErrLeaseLost, verdictFenced, settledNothing},
		{"ledger down: the ending stands", ledger.ErrUnavailable, verdictRetry, settledRetry},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := &fakeLedger{err: c.err}
			r := stageRuntime(t, nil, l)
			st := stageState(r, 1)
			_, done := r.decode(requestMsg(t, nil, nil), st)
			require.False(t, done)
			st.attempt, st.invoked = retry.Attempt{Number: 1, Class: retry.ClassRetryable}, true
			end := r.commit(st, ending{verdict: verdictRetry, delay: time.Second, decision: retry.Decision{Action: retry.ActionRetry, Counted: true}})
			require.Equal(t, c.verdict, end.verdict)
			require.Equal(t, c.settled, end.settled)
			require.Len(t, l.finished, 1)
			require.True(t, l.finished[0].Counted)
			require.False(t, l.finished[0].Succeeded)
		})
	}
}

// An ending decided before the handler ran is not recorded in the ledger
// by commit (begin gave its claimed attempt back already).
func TestCommitRecordsNoAttemptThatDidNotRun(t *testing.T) {
	t.Parallel()
	l := &fakeLedger{}
	r := stageRuntime(t, nil, l)
	st := stageState(r, 1)
	_, done := r.decode(requestMsg(t, nil, nil), st)
	require.False(t, done)
	end := r.commit(st, released(time.Second))
	require.Equal(t, settledRelease, end.settled)
	require.Equal(t, time.Second, end.delay)
	require.Empty(t, l.finished)
}

// decide is pure: what an attempt's end asks of flow control, metrics and
// events comes back as data (effects), with no server and no store behind
// the runtime. A persona whose limiter would be asked to cool down has no
// limiter client here at all: any call would panic.
func TestDecideReturnsEffectsAsData(t *testing.T) {
	t.Parallel()
	throttled := func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{}, &handlers.StatusError{Code: 429, RetryAfter: 7 * time.Second}
	}
	fail := func(context.Context, *handlers.Request) (handlers.Result, error) {
		return handlers.Result{}, errors.New("provider 502")
	}
	ok := func(context.Context, *handlers.Request) (handlers.Result, error) { return handlers.Result{}, nil }
	withLimiter := func(st *attemptState) { st.persona.flow = &personaFlow{persona: "p", limiter: "provider"} }
	cases := []struct {
		name    string
		h       handlers.Func
		mutate  func(*attemptState)
		cancel  error
		verdict verdict
		want    effects
	}{
		{"success: the attempt is reported", ok, nil, nil, verdictAck, effects{ran: true}},
		{"failure: flow control hears the error", fail, nil, nil, verdictRetry, effects{ran: true}},
		{"throttled without a limiter: an ordinary retry", throttled, nil, nil, verdictRetry,
			effects{ran: true, throttled: true}},
		{"throttled with a limiter: the cool-down is commit's", throttled, withLimiter, nil, 0,
			effects{ran: true, throttled: true, coolDown: true, wait: 7 * time.Second}},
		{"cancelled: the record is read by commit", fail, nil, ErrCancelled, verdictSettled, effects{cancelled: true}},
		{"lease lost: nothing", fail, nil, transport.ErrLeaseLost, verdictFenced, effects{}},
		{"shutdown: released, nothing reported", fail, nil, transport.ErrShuttingDown, verdictRelease, effects{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			if c.cancel != nil {
				var cancel context.CancelCauseFunc
				ctx, cancel = context.WithCancelCause(ctx)
				cancel(c.cancel)
			}
			end, _ := decided(t, c.h, 1, ctx, c.mutate)
			require.Equal(t, c.verdict, end.verdict)
			got := end.effects
			require.Equal(t, c.want.ran, got.ran)
			require.Equal(t, c.want.ran, got.err != nil || c.verdict == verdictAck, "the handler's error travels with it")
			got.err = nil
			require.Equal(t, c.want, got)
		})
	}
}
