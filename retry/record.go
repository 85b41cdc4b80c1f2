package retry

import (
	"time"

	"github.com/personaq/personaq/schemas"
)

// Record is the attempt as quarantine records, saga states and outcome
// events keep it: the first error type only, the duration in milliseconds,
// the time in UTC, progress and usage when they were reported.
func (a Attempt) Record() schemas.AttemptRecord {
	ar := schemas.AttemptRecord{
		Attempt: a.Number, Agent: a.Agent, Class: a.Class.String(), Error: a.Error,
		DurationMs: a.Duration.Milliseconds(), At: a.At.UTC(),
	}
	if len(a.ErrorTypes) > 0 {
		ar.ErrorType = a.ErrorTypes[0]
	}
	if a.Progress.Known() {
		ar.Progress = &schemas.Progress{Completed: a.Progress.Completed, Total: a.Progress.Total}
	}
	ar.Usage = a.Usage.Record()
	return ar
}

// Record is u as records and events carry it: nil when nothing was
// reported.
func (u Usage) Record() *schemas.Usage {
	if u.IsZero() {
		return nil
	}
	return &schemas.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD}
}

// AttemptFromRecord reads a stored attempt back for Decide: what Record
// kept, nothing more (one error type; no feedback, output or Retry-After).
// An unknown class reads as ClassRetryable, a failure that counts.
func AttemptFromRecord(r schemas.AttemptRecord) Attempt {
	c, err := ParseClass(r.Class)
	if err != nil {
		c = ClassRetryable
	}
	a := Attempt{
		Number: r.Attempt, Agent: r.Agent, Class: c, Error: r.Error,
		Duration: time.Duration(r.DurationMs) * time.Millisecond, At: r.At,
	}
	if r.ErrorType != "" {
		a.ErrorTypes = []string{r.ErrorType}
	}
	if r.Progress != nil {
		a.Progress = Progress{Completed: r.Progress.Completed, Total: r.Progress.Total}
	}
	if r.Usage != nil {
		a.Usage = Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens, CostUSD: r.Usage.CostUSD}
	}
	return a
}
