package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/personaq/personaq/retry"
)

// DemoPersonas returns the built-in personas `personaq dev` serves, by
// name: one per way an attempt can end. Each decides from the attempt
// number alone, so a demo run is the same every time.
func DemoPersonas() map[string]Handler {
	const work = 200 * time.Millisecond
	return map[string]Handler{
		"echo":      DemoSucceed(work),
		"flaky":     DemoFlaky(3, work),
		"terminal":  DemoTerminal(),
		"slowpoke":  DemoTimeout(),
		"plateau":   DemoPlateau(9, 5),
		"validator": DemoValidation(2),
	}
}

// DemoSucceed works for the given time, then echoes the request back.
func DemoSucceed(work time.Duration) Handler {
	return Func(func(ctx context.Context, req *Request) (Result, error) {
		if err := demoWork(ctx, work); err != nil {
			return Result{}, err
		}
		return demoAnswer(req, nil), nil
	})
}

// DemoFlaky fails retryably until attempt succeedOn (default 3), then
// succeeds like DemoSucceed.
func DemoFlaky(succeedOn int, work time.Duration) Handler {
	if succeedOn <= 0 {
		succeedOn = 3
	}
	return Func(func(ctx context.Context, req *Request) (Result, error) {
		if err := demoWork(ctx, work); err != nil {
			return Result{}, err
		}
		if req.Attempt < succeedOn {
			return Result{Usage: demoUsage}, Retryable(fmt.Errorf("demo: flaky failure on attempt %d (succeeds on attempt %d)", req.Attempt, succeedOn))
		}
		return demoAnswer(req, nil), nil
	})
}

// DemoTerminal fails every attempt with an HTTP 400, which no retry can fix.
func DemoTerminal() Handler {
	return Func(func(context.Context, *Request) (Result, error) {
		return Result{}, Terminal(&StatusError{
			Code: http.StatusBadRequest,
			Body: `{"error":{"type":"invalid_request_error","message":"demo: the prompt is malformed"}}`,
		})
	})
}

// DemoTimeout never answers: each attempt lasts until its deadline.
func DemoTimeout() Handler {
	return Func(func(ctx context.Context, _ *Request) (Result, error) {
		<-ctx.Done()
		return Result{}, interrupted(ctx, errors.New("demo: slowpoke never answered"))
	})
}

// DemoPlateau reports progress stuckAt/total and fails retryably on every
// attempt, so the adaptive policy sees a plateau and defers (adaptive
// retry: confirmed on attempt 4, across both agents).
// A non-positive total means 9 (stuck at 5).
func DemoPlateau(total, stuckAt int) Handler {
	if total <= 0 {
		total, stuckAt = 9, 5
	}
	stuckAt = min(max(stuckAt, 0), total)
	return Func(func(context.Context, *Request) (Result, error) {
		res := Result{Progress: retry.Progress{Completed: stuckAt, Total: total}, Usage: demoUsage}
		return res, Retryable(fmt.Errorf("demo: stuck at %d/%d tasks", stuckAt, total))
	})
}

// DemoValidation gives an invalid answer, with feedback, until attempt
// fixOn (default 2) — and then only if that attempt was handed the earlier
// feedback (retry with feedback).
func DemoValidation(fixOn int) Handler {
	if fixOn <= 0 {
		fixOn = 2
	}
	return Func(func(_ context.Context, req *Request) (Result, error) {
		if req.Attempt < fixOn || len(req.Feedback) == 0 {
			return Result{}, Validation(`the answer must be JSON with a "summary" field`,
				fmt.Errorf("demo: invalid answer on attempt %d", req.Attempt))
		}
		return demoAnswer(req, req.Feedback), nil
	})
}

// demoUsage is what each demo attempt that "called a model" reports using
// (the flaky, plateau and answering personas), so `task show`, the records
// and the token metrics have something to show.
var demoUsage = retry.Usage{InputTokens: 1200, OutputTokens: 300, CostUSD: 0.0045}

// demoAnswer echoes the request and reports all expected tasks done.
func demoAnswer(req *Request, fixed []string) Result {
	// Input was decoded from JSON, so the whole answer always encodes.
	out, _ := json.Marshal(struct {
		Persona string          `json:"persona"`
		Attempt int             `json:"attempt"`
		Agent   string          `json:"agent,omitempty"`
		Fixed   []string        `json:"fixed,omitempty"`
		Input   json.RawMessage `json:"input,omitempty"`
	}{req.Message.Persona, req.Attempt, req.Agent, fixed, req.Message.Input})
	res := Result{Output: out, Usage: demoUsage}
	if t := req.Message.ProgressTotal; t > 0 {
		res.Progress = retry.Progress{Completed: t, Total: t}
	}
	return res
}

// demoWork stands in for an agent's work, and stops when ctx does.
func demoWork(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return interrupted(ctx, errors.New("demo: work stopped"))
	}
}
