package retry

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Explanation is what `personaq policy explain` shows for a policy: every
// retry with its wait and agent, and the budget. JSON field names follow
// the step budget's log fields (camelCase, …Ms).
type Explanation struct {
	Policy           string     `json:"policy"`
	Persona          string     `json:"persona,omitempty"`
	MaxAttempts      int        `json:"maxAttempts"`
	MaxRetries       int        `json:"maxRetries"`
	AttemptTimeoutMs int64      `json:"attemptTimeoutMs"`
	Schedule         string     `json:"schedule"`
	Retries          []RetryRow `json:"retries"`
	NonRetryable     []string   `json:"nonRetryable"`
	NetworkDelayMs   int64      `json:"networkDelayMs"`
	TotalBackoffMs   int64      `json:"totalBackoffMs"`
	BufferMs         int64      `json:"bufferMs"`
	StepDeadlineMs   int64      `json:"stepDeadlineMs"`
	// StepDeadlineMinutes is StepDeadlineMs in minutes (7.5 for context).
	StepDeadlineMinutes float64 `json:"stepDeadlineMinutes"`
	WorstCaseDeadlineMs int64   `json:"worstCaseDeadlineMs"`
	// Invalid is Policy.Validate's error, if any: explaining a bad policy
	// shows what is wrong instead of failing.
	Invalid string `json:"invalid,omitempty"`
	// BudgetMaxTokens and BudgetMaxCostUSD are the policy's usage budget
	// (absent: no limit).
	BudgetMaxTokens  int64   `json:"budgetMaxTokens,omitempty"`
	BudgetMaxCostUSD float64 `json:"budgetMaxCostUsd,omitempty"`
}

// RetryRow is one retry: the wait before it and the attempt it starts.
type RetryRow struct {
	Retry   int `json:"retry"`
	Attempt int `json:"attempt"`
	// BackoffMs is the longest wait (the budget's); MinBackoffMs differs
	// from it only for jittered schedules.
	BackoffMs      int64   `json:"backoffMs"`
	MinBackoffMs   int64   `json:"minBackoffMs"`
	BackoffSeconds float64 `json:"backoffSeconds"`
	// AgentRole runs the attempt when the request names a fallback agent;
	// without one every attempt runs the primary.
	AgentRole Role `json:"agentRole"`
}

// Explain describes p (with defaults applied). It is pure and deterministic:
// jittered schedules are shown by their bounds, never sampled.
func Explain(p Policy) Explanation {
	p = p.WithDefaults()
	b := NewBudget(p)
	e := Explanation{
		Policy:              p.Name,
		Persona:             p.Persona,
		MaxAttempts:         p.MaxAttempts,
		MaxRetries:          b.MaxRetries,
		AttemptTimeoutMs:    p.AttemptTimeout.Milliseconds(),
		Schedule:            p.Schedule.String(),
		Retries:             retryRows(p.Schedule, b.MaxRetries),
		NonRetryable:        append([]string{}, p.NonRetryable...),
		NetworkDelayMs:      p.NetworkDelay.Milliseconds(),
		TotalBackoffMs:      b.TotalBackoff.Milliseconds(),
		BufferMs:            b.Buffer.Milliseconds(),
		StepDeadlineMs:      b.StepDeadline.Milliseconds(),
		StepDeadlineMinutes: b.StepDeadline.Minutes(),
		WorstCaseDeadlineMs: b.WorstCaseDeadline.Milliseconds(),
	}
	e.BudgetMaxTokens, e.BudgetMaxCostUSD = p.UsageBudget.MaxTokens, p.UsageBudget.MaxCostUSD
	if err := p.Validate(); err != nil {
		e.Invalid = err.Error()
	}
	return e
}

func retryRows(s Schedule, n int) []RetryRow {
	rows := make([]RetryRow, n)
	for i := range rows {
		lo, hi, _ := DelayRange(s, i+1)
		rows[i] = RetryRow{
			Retry:          i + 1,
			Attempt:        i + 2,
			BackoffMs:      hi.Milliseconds(),
			MinBackoffMs:   lo.Milliseconds(),
			BackoffSeconds: hi.Seconds(),
			AgentRole:      RoleFor(i+2, true),
		}
	}
	return rows
}

// WriteText prints e as a readable table followed by the step budget's
// "Calculated PersonaRequestStep timeout" line.
func (e Explanation) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	ew := &errWriter{w: tw}
	e.writeSummary(ew)
	e.writeRetries(ew)
	e.writeBudget(ew)
	if ew.err != nil {
		return ew.err
	}
	return tw.Flush()
}

func (e Explanation) writeSummary(w *errWriter) {
	w.printf("policy\t%s\n", e.Policy)
	if e.Persona != "" {
		w.printf("persona\t%s\n", e.Persona)
	}
	w.printf("max attempts\t%d (%d retries)\n", e.MaxAttempts, e.MaxRetries)
	w.printf("attempt timeout\t%s\n", ms(e.AttemptTimeoutMs))
	w.printf("schedule\t%s\n", e.Schedule)
	w.printf("network delay\t%s (network failures wait this instead; never counted toward plateau)\n", ms(e.NetworkDelayMs))
	w.printf("non-retryable\t%s\n", orNone(e.NonRetryable))
	if e.BudgetMaxTokens != 0 || e.BudgetMaxCostUSD != 0 {
		w.printf("usage budget\t%s (ends the request budget_exhausted before an attempt that would overspend it)\n",
			budgetText(e.BudgetMaxTokens, e.BudgetMaxCostUSD))
	}
	if e.Invalid != "" {
		w.printf("INVALID\t%s\n", e.Invalid)
	}
}

func (e Explanation) writeRetries(w *errWriter) {
	if len(e.Retries) == 0 {
		w.printf("\nno retries: the first failure is final\n")
		return
	}
	w.printf("\nretry\tattempt\tagent (with fallback)\tbackoff\n")
	for _, r := range e.Retries {
		w.printf("%d\t%d\t%s\t%s\n", r.Retry, r.Attempt, r.AgentRole, backoffText(r))
	}
}

func (e Explanation) writeBudget(w *errWriter) {
	w.printf("\ntotal backoff\t%s\n", ms(e.TotalBackoffMs))
	w.printf("step deadline\t%s = %d × %s + %s backoff + %s buffer\n", ms(e.StepDeadlineMs),
		e.MaxRetries+1, ms(e.AttemptTimeoutMs), ms(e.TotalBackoffMs), ms(e.BufferMs))
	w.printf("worst case\t%s (network/validation waits, extended last attempt)\n", ms(e.WorstCaseDeadlineMs))
	w.printf("\nCalculated PersonaRequestStep timeout to accommodate retries: persona=%s "+
		"personaTimeoutMs=%d personaTimeoutMinutes=%s maxRetries=%d totalBackoffMs=%d "+
		"totalBackoffMinutes=%s calculatedTimeout=%d calculatedTimeoutMinutes=%s\n",
		orNoneString(e.Persona), e.AttemptTimeoutMs, minutes(e.AttemptTimeoutMs), e.MaxRetries,
		e.TotalBackoffMs, minutes(e.TotalBackoffMs), e.StepDeadlineMs, minutes(e.StepDeadlineMs))
}

func backoffText(r RetryRow) string {
	if r.MinBackoffMs == r.BackoffMs {
		return ms(r.BackoffMs).String()
	}
	return fmt.Sprintf("%s–%s (jitter)", ms(r.MinBackoffMs), ms(r.BackoffMs))
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// minutes formats like the step budget's logs: two decimals.
func minutes(n int64) string { return fmt.Sprintf("%.2f", float64(n)/60000) }

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func orNoneString(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// errWriter keeps the first write error so the printing code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (w *errWriter) printf(format string, args ...any) {
	if w.err == nil {
		_, w.err = fmt.Fprintf(w.w, format, args...)
	}
}

func budgetText(tokens int64, usd float64) string {
	var parts []string
	if tokens != 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", tokens))
	}
	if usd != 0 {
		parts = append(parts, fmt.Sprintf("$%g", usd))
	}
	return strings.Join(parts, ", ")
}
