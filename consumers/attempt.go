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

// The invoke stage runs the persona's handler for the attempt, under its
// timeout (the policy's, cut to the caller's step deadline), a panic
// recovered as a terminal outcome: startInvoke readies the run on the
// router's goroutine, invokeApart (process.go) calls the handler on the
// attempt's own, and endInvoke closes the run.

// handlerCall is one run of the handler, readied by startInvoke.
type handlerCall struct {
	st        *attemptState
	ctx       context.Context // the attempt's, under its timeout, with the live output writer
	cancel    context.CancelFunc
	req       *handlers.Request
	closeLive func()
	out       ran
}

// startInvoke readies the handler's run: the attempt's role, agent and
// timeout, its context, its started event, the request the handler gets.
func (r *Runtime) startInvoke(ctx context.Context, st *attemptState) *handlerCall {
	st.attempt.Role = retry.RoleFor(st.attempt.Number, st.hasFallback())
	st.attempt.Agent = st.agentFor(st.attempt.Role)
	timeout := retry.TimeoutFor(*st.policy, st.history, st.attempt.Number)
	if !st.deadline.IsZero() {
		timeout = min(timeout, st.deadline.Sub(r.now())) // the caller stops waiting then
	}
	c := &handlerCall{st: st}
	c.ctx, c.cancel = context.WithTimeout(ctx, timeout)
	st.attempt.At = r.now()
	st.attempt.Trace = tracing.Traceparent(c.ctx)
	r.attemptStarted(st)
	r.publishSupersede(st)
	c.req = &handlers.Request{
		Message: st.req, Attempt: st.attempt.Number, Role: st.attempt.Role, Agent: st.attempt.Agent,
		Previous: st.history, Feedback: retry.FeedbackFor(st.history),
		ProgressInterval: retry.ProgressIntervalFor(*st.policy, st.history),
	}
	if st.lease != nil {
		c.req.LeaseDeadline = st.lease.until // the agent's supervisor stops it by then
	}
	c.ctx, c.closeLive = r.liveOutput(c.ctx, st)
	r.obs.InFlight(st.persona.name, 1)
	return c
}

// handlerPanicked turns a panic of the handler (p, when not nil) into a
// terminal outcome.
func (r *Runtime) handlerPanicked(c *handlerCall, p any) {
	if p == nil {
		return
	}
	c.out.err = handlers.Terminal(fmt.Errorf("%w: %v", handlers.ErrPanic, p))
	c.st.log.Error().Interface("panic", p).Bytes("stack", debug.Stack()).Int("attempt", c.st.attempt.Number).Msg("persona handler panicked; treated as terminal")
}

// endInvoke closes the handler's run once it returned: the final chunk
// of its live output goes before the terminal record; what it took.
func (r *Runtime) endInvoke(c *handlerCall) {
	st, out := c.st, &c.out
	c.closeLive()
	r.obs.InFlight(st.persona.name, -1)
	st.attempt.Duration = r.now().Sub(st.attempt.At)
	out.overran = out.err != nil && errors.Is(c.ctx.Err(), context.DeadlineExceeded)
	c.cancel()
	if u := out.result.Usage; !u.IsZero() {
		r.observeUsage(st.persona.name, u)
	}
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
	d := retry.Decide(retry.Input{Policy: *st.policy, HasFallback: st.hasFallback(), History: st.history,
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
