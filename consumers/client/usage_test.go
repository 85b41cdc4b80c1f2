package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/consumers/client"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// TestRunFailsBudgetExhausted: a request whose token budget runs out fails
// with a StoppedError matching both ErrBudgetExhausted and ErrBlocked, and
// its record says what was spent.
func TestRunFailsBudgetExhausted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.serve(consumers.Config{}, consumers.Persona{Name: "coder", Handler: handlers.Func(
		func(context.Context, *handlers.Request) (handlers.Result, error) {
			return handlers.Result{Usage: retry.Usage{InputTokens: 3000, OutputTokens: 1000}}, errors.New("tests failed")
		}), Policy: policy(4, 2*time.Second)})
	req := schemas.NewRequest("story-budget", "implement", "coder")
	req.Budget = &schemas.Budget{MaxTokens: 10_000}
	_, err := e.c.Run(context.Background(), req)
	var stopped *client.StoppedError
	require.ErrorAs(t, err, &stopped)
	require.ErrorIs(t, err, client.ErrBudgetExhausted)
	require.ErrorIs(t, err, client.ErrBlocked)
	require.NotErrorIs(t, err, client.ErrEscalated)
	require.Equal(t, 2, stopped.Record.Attempts) // 8000 + 4000 > 10000
	require.Equal(t, &schemas.Usage{InputTokens: 6000, OutputTokens: 2000}, stopped.Record.Usage)

	exhausted := &client.StoppedError{Record: &schemas.OutcomeEvent{Outcome: schemas.OutcomeQuarantined, Reason: schemas.ReasonExhausted}}
	require.ErrorIs(t, exhausted, client.ErrBlocked)
	require.NotErrorIs(t, exhausted, client.ErrBudgetExhausted)
}
