package handlers_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/schemas"
)

// CommitError is a git step's own error type; policies name it to stop
// retrying (the git policy's non-retryable errors).
type CommitError struct{ Reason string }

func (e *CommitError) Error() string { return "commit: " + e.Reason }

func ExampleClassify() {
	errs := []error{
		fmt.Errorf("git step: %w", &CommitError{Reason: "nothing to commit"}),
		handlers.After(30*time.Second, errors.New("rate limited")),
		fmt.Errorf("call planner: %w", &net.DNSError{Err: "no such host", Name: "planner.internal"}),
		handlers.FromStatus(400, "bad prompt", "", time.Now()),
	}
	for _, err := range errs {
		c := handlers.Classify(err)
		fmt.Println(c.Class, c.TypeNames, c.RetryAfter)
	}
	// Output:
	// retryable [CommitError] 0s
	// retryable [] 30s
	// network [DNSError] 0s
	// terminal [BadRequestError] 0s
}

func ExampleValidation() {
	err := handlers.Validation(`the plan needs a "summary" field`, errors.New("invalid plan"))
	c := handlers.Classify(err)
	fmt.Println(c.Class)
	fmt.Println(c.Feedback)
	// Output:
	// validation
	// the plan needs a "summary" field
}

// A persona written in Go: a handlers.Func per persona, registered with the
// runtime like the built-in invokers. This one wants a second attempt.
func ExampleFunc() {
	planner := handlers.Func(func(ctx context.Context, req *handlers.Request) (handlers.Result, error) {
		if len(req.Feedback) == 0 {
			return handlers.Result{}, handlers.Validation("say which files you will touch", errors.New("plan too vague"))
		}
		out, err := json.Marshal(map[string]any{"plan": "edit main.go", "attempt": req.Attempt})
		return handlers.Result{Output: out}, err
	})

	msg := &schemas.PersonaRequest{TaskID: "task-1", Step: "plan", Persona: "planner"}
	var feedback []string
	for attempt := 1; attempt <= 2; attempt++ {
		res, err := planner.Handle(context.Background(), &handlers.Request{Message: msg, Attempt: attempt, Feedback: feedback})
		c := handlers.Classify(err)
		fmt.Printf("attempt %d: %s %s\n", attempt, c.Class, cmp.Or(string(res.Output), "-"))
		if c.Feedback != "" {
			feedback = append(feedback, c.Feedback)
		}
	}
	// Output:
	// attempt 1: validation -
	// attempt 2: succeeded {"attempt":2,"plan":"edit main.go"}
}

func ExampleFromStatus() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	err := handlers.FromStatus(429, `{"error":"rate_limit_error"}`, "20", now)
	c := handlers.Classify(err)
	fmt.Println(c.Class, c.TypeNames, c.RetryAfter)
	fmt.Println(err)
	// Output:
	// retryable [RateLimitError] 20s
	// HTTP 429 RateLimitError: {"error":"rate_limit_error"}
}
