package consumers

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/personaq/personaq/consumers/tracing"
	"github.com/personaq/personaq/consumers/transport"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
)

// ran is what one run of a persona's handler produced.
type ran struct {
	result handlers.Result
	err    error
	// overran: the attempt's timeout ended it.
	overran bool
}

// invoke is the stage that runs the persona's handler for the attempt,
// under its timeout (the policy's, cut to the caller's step deadline). A
// panic is recovered as a terminal outcome.
func (r *Runtime) invoke(ctx context.Context, st *attemptState) ran {
	st.attempt.Role = retry.RoleFor(st.attempt.Number, st.hasFallback())
	st.attempt.Agent = st.agentFor(st.attempt.Role)
	timeout := retry.TimeoutFor(st.policy, st.history, st.attempt.Number)
	if !st.deadline.IsZero() {
		timeout = min(timeout, st.deadline.Sub(r.now())) // the caller stops waiting then
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st.attempt.At = r.now()
	st.attempt.Trace = tracing.Traceparent(actx)
	r.attemptStarted(st)
	r.publishSupersede(st)
	out := r.call(actx, st)
	st.attempt.Duration = r.now().Sub(st.attempt.At)
	out.overran = out.err != nil && errors.Is(actx.Err(), context.DeadlineExceeded)
	if u := out.result.Usage; !u.IsZero() {
		r.observeUsage(st.persona.name, u)
	}
	return out
}

// call runs the handler once, recovering a panic as a terminal error.
func (r *Runtime) call(ctx context.Context, st *attemptState) (out ran) {
	defer func() {
		if p := recover(); p != nil {
			out.err = handlers.Terminal(fmt.Errorf("%w: %v", handlers.ErrPanic, p))
			st.log.Error().Interface("panic", p).Bytes("stack", debug.Stack()).Int("attempt", st.attempt.Number).Msg("persona handler panicked; treated as terminal")
		}
	}()
	req := &handlers.Request{
		Message: st.req, Attempt: st.attempt.Number, Role: st.attempt.Role, Agent: st.attempt.Agent,
		Previous: st.history, Feedback: retry.FeedbackFor(st.history),
		ProgressInterval: retry.ProgressIntervalFor(st.policy, st.history),
	}
	if st.lease != nil {
		req.LeaseDeadline = st.lease.until // the agent's supervisor stops it by then
	}
	r.obs.InFlight(st.persona.name, 1)
	defer r.obs.InFlight(st.persona.name, -1)
	ctx, closeLive := r.liveOutput(ctx, st)
	defer closeLive() // the final chunk goes before the terminal record
	out.result, out.err = st.persona.handler.Handle(ctx, req)
	return out
}

// decide is the stage that reads the attempt's outcome: an attempt whose
// lease was lost settles nothing, one cut short by a shutdown is released
// uncounted, one stopped by a cancel ends as its cancelled record, a
// provider's throttling is flow control's (the limiter's cool-down);
// anything else is classified and retry.Decide says what comes next.
//
// It does no I/O: what the attempt's end asks of flow control, metrics and
// events is returned as data in the ending (effects), for commit to apply.
func (r *Runtime) decide(ctx context.Context, st *attemptState, out ran) ending {
	if r.leaseLost(ctx, st) {
		return fenced
	}
	if end, done := r.shuttingDown(ctx, st, out); done {
		return end
	}
	if end, done := r.cancelledWhileRunning(ctx, st); done {
		return end
	}
	classify(&st.attempt, out)
	fx := effects{ran: true, err: out.err}
	if wait, throttled := handlers.Throttled(out.err); throttled {
		fx.throttled = true
		if f := st.persona.flow; f != nil && f.limiter != "" {
			// Released until the limiter's cool-down ends: commit learns how
			// long from the limiter, or decides it as a failure without one.
			fx.coolDown, fx.wait = true, wait
			return ending{effects: fx}
		}
	}
	end := r.decided(st)
	if end.verdict == verdictAck {
		end.output = out.result.Output
	}
	end.effects = fx
	return end
}

// decided is the classified attempt's ending: retry.Decide's, cut to the
// caller's step deadline, logged.
func (r *Runtime) decided(st *attemptState) ending {
	d := retry.Decide(retry.Input{Policy: st.policy, HasFallback: st.hasFallback(), History: st.history,
		Current: st.attempt, ProgressTotal: st.req.ProgressTotal})
	return r.toEnding(st, r.checkDeadline(st, d))
}

// leaseLost abandons an attempt whose lease (or claim on its message) was
// lost while it ran: it was cancelled, another replica may run the request
// now, and this delivery settles nothing.
func (r *Runtime) leaseLost(ctx context.Context, st *attemptState) bool {
	if !errors.Is(context.Cause(ctx), transport.ErrLeaseLost) && !st.lease.isLost() && !st.delivery.Lost() {
		return false
	}
	st.log.Warn().Int("attempt", st.attempt.Number).Dur("duration", st.attempt.Duration).
		Msg("attempt abandoned: its lease was lost; nothing is settled or recorded")
	return true
}

// shuttingDown releases an attempt cut short by a graceful shutdown: it is
// not the handler's failure, so it is not counted.
func (r *Runtime) shuttingDown(ctx context.Context, st *attemptState, out ran) (ending, bool) {
	if out.err == nil || !errors.Is(context.Cause(ctx), transport.ErrShuttingDown) {
		return ending{}, false
	}
	st.attempt.Class = retry.ClassSnooze
	st.log.Info().Int("attempt", st.attempt.Number).Msg("attempt interrupted by shutdown; released without counting it")
	return released(0), true
}

// classify fills the attempt's outcome from what the handler returned.
func classify(a *retry.Attempt, out ran) {
	c := handlers.Classify(out.err)
	if out.overran && c.Class == retry.ClassRetryable {
		c.Class = retry.ClassTimeout // the handler overran and returned something else
	}
	a.Class, a.ErrorTypes, a.RetryAfter, a.Feedback = c.Class, c.TypeNames, c.RetryAfter, c.Feedback
	a.Progress = out.result.Progress
	a.Usage = out.result.Usage
	if out.err != nil {
		a.Error = out.err.Error()
		a.Output = string(out.result.Output) // what the persona answered (fed back to the next attempt); the ledger bounds it
	}
}

// checkDeadline turns a retry that could not start before the caller's
// step deadline into the request's end: nobody is waiting for it.
func (r *Runtime) checkDeadline(st *attemptState, d retry.Decision) retry.Decision {
	if st.deadline.IsZero() || d.Action != retry.ActionRetry || r.now().Add(d.Delay).Before(st.deadline) {
		return d
	}
	end := deadlineDecision(st.deadline, fmt.Sprintf("passes before retry %d could start (in %s); last: %s", d.NextAttempt, d.Delay, st.attempt.Error))
	end.Counted = true
	return end
}

// toEnding is how a decision ends the delivery, logged with the fields
// operators grep for. A retry's delay is applied by commit.
func (r *Runtime) toEnding(st *attemptState, d retry.Decision) ending {
	var end ending
	switch d.Action {
	case retry.ActionAck:
		end = ending{verdict: verdictAck, decision: d}
		r.logAttempt(st, st.log.Info()).Msg(r.message(st, d))
	case retry.ActionRetry:
		end = ending{verdict: verdictRetry, delay: d.Delay, decision: d}
		r.logRetry(st, d)
	default:
		end = quarantined(d)
		r.logStop(st, d)
	}
	if d.Warning != "" {
		st.log.Warn().Int("attempt", st.attempt.Number).Str("policy", st.policy.Name).Str("warning", d.Warning).
			Msg("retry policy corrected: " + d.Warning)
	}
	return end
}
