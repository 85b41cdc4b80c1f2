package handlers

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

// demoAttempt is how one attempt of a demo persona should end.
type demoAttempt struct {
	feedback []string
	class    retry.Class
	progress retry.Progress
}

func TestDemoPersonasAcrossAttempts(t *testing.T) {
	t.Parallel()
	done := retry.Progress{Completed: 9, Total: 9}
	stuck := retry.Progress{Completed: 5, Total: 9}
	fb := []string{`the answer must be JSON with a "summary" field`}
	tests := []struct {
		name     string
		handler  Handler
		attempts []demoAttempt
	}{
		{"Echo", DemoSucceed(0), []demoAttempt{
			{class: retry.ClassSucceeded, progress: done},
		}},
		{"FlakyDefault", DemoFlaky(0, 0), []demoAttempt{
			{class: retry.ClassRetryable}, {class: retry.ClassRetryable},
			{class: retry.ClassSucceeded, progress: done}, {class: retry.ClassSucceeded, progress: done},
		}},
		{"FlakySecond", DemoFlaky(2, 0), []demoAttempt{
			{class: retry.ClassRetryable}, {class: retry.ClassSucceeded, progress: done},
		}},
		{"Terminal", DemoTerminal(), []demoAttempt{
			{class: retry.ClassTerminal}, {class: retry.ClassTerminal},
		}},
		{"Plateau", DemoPlateau(9, 5), []demoAttempt{
			{class: retry.ClassRetryable, progress: stuck}, {class: retry.ClassRetryable, progress: stuck},
			{class: retry.ClassRetryable, progress: stuck}, {class: retry.ClassRetryable, progress: stuck},
		}},
		{"PlateauDefault", DemoPlateau(0, 0), []demoAttempt{
			{class: retry.ClassRetryable, progress: stuck},
		}},
		{"ValidatorFixesWithFeedback", DemoValidation(0), []demoAttempt{
			{class: retry.ClassValidation}, {feedback: fb, class: retry.ClassSucceeded, progress: done},
		}},
		{"ValidatorNeedsFeedback", DemoValidation(2), []demoAttempt{
			{class: retry.ClassValidation}, {class: retry.ClassValidation},
		}},
		{"ValidatorNotBeforeFixOn", DemoValidation(3), []demoAttempt{
			{feedback: fb, class: retry.ClassValidation}, {feedback: fb, class: retry.ClassValidation},
			{feedback: fb, class: retry.ClassSucceeded, progress: done},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for i, want := range tt.attempts {
				req := testRequest()
				req.Attempt, req.Feedback = i+1, want.feedback
				res, err := tt.handler.Handle(t.Context(), req)
				c := Classify(err)
				require.Equal(t, want.class, c.Class, "attempt %d: %v", i+1, err)
				require.Equal(t, want.progress, res.Progress, "attempt %d", i+1)
				if want.class == retry.ClassValidation {
					require.Equal(t, fb[0], c.Feedback)
				}
			}
		})
	}
}

func TestDemoTerminalReadsLikeABadRequest(t *testing.T) {
	t.Parallel()
	_, err := DemoTerminal().Handle(t.Context(), testRequest())
	require.Equal(t, []string{"BadRequestError"}, TypeNames(err))
	require.ErrorContains(t, err, "HTTP 400 BadRequestError")
}

func TestDemoSucceedEchoes(t *testing.T) {
	t.Parallel()
	req := testRequest()
	req.Feedback = nil
	res, err := DemoSucceed(time.Millisecond).Handle(t.Context(), req)
	require.NoError(t, err)
	var out struct {
		Persona string          `json:"persona"`
		Attempt int             `json:"attempt"`
		Input   json.RawMessage `json:"input"`
	}
	require.NoError(t, json.Unmarshal(res.Output, &out))
	require.Equal(t, "planner", out.Persona)
	require.Equal(t, 2, out.Attempt)
	require.JSONEq(t, `{"goal":"ship"}`, string(out.Input))
}

func TestDemoStopsWithContext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler Handler
	}{
		{"Slowpoke", DemoTimeout()},
		{"EchoMidWork", DemoSucceed(time.Hour)},
		{"FlakyMidWork", DemoFlaky(1, time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithDeadline(t.Context(), time.Now())
			defer cancel()
			_, err := tt.handler.Handle(ctx, testRequest())
			require.Equal(t, retry.ClassTimeout, Classify(err).Class, "error: %v", err)
			require.ErrorIs(t, err, context.DeadlineExceeded)
		})
	}
}

func TestDemoPersonasNames(t *testing.T) {
	t.Parallel()
	names := make([]string, 0, 6)
	for name := range DemoPersonas() {
		names = append(names, name)
	}
	slices.Sort(names)
	require.Equal(t, []string{"echo", "flaky", "plateau", "slowpoke", "terminal", "validator"}, names)
}
