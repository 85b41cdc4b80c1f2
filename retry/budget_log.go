package retry

import "github.com/rs/zerolog"

// The step budget's two start-up log messages. A caller that runs a
// persona step under a budget logs both (LogBudget), with the fields of
// Budget.CalculatedFields and Budget.StepTimeoutFields.
const (
	MsgCalculatedTimeout     = "Calculated PersonaRequestStep timeout to accommodate retries"
	MsgStepTimeoutConfigured = "Step timeout configured"
)

// CalculatedFields are the fields of MsgCalculatedTimeout, in order, as
// key/value pairs for zerolog's Event.Fields: step, persona,
// personaTimeoutMs, personaTimeoutMinutes, maxRetries, totalBackoffMs,
// totalBackoffMinutes, calculatedTimeout (ms) and calculatedTimeoutMinutes.
// Minutes are strings with two decimals ("7.50").
func (b Budget) CalculatedFields(step string) []any {
	return []any{
		"step", step,
		"persona", b.Persona,
		"personaTimeoutMs", b.AttemptTimeout.Milliseconds(),
		"personaTimeoutMinutes", minutes(b.AttemptTimeout.Milliseconds()),
		"maxRetries", b.MaxRetries,
		"totalBackoffMs", b.TotalBackoff.Milliseconds(),
		"totalBackoffMinutes", minutes(b.TotalBackoff.Milliseconds()),
		"calculatedTimeout", b.StepDeadline.Milliseconds(),
		"calculatedTimeoutMinutes", minutes(b.StepDeadline.Milliseconds()),
	}
}

// StepTimeoutFields are the fields of MsgStepTimeoutConfigured, in order:
// step, persona, timeoutMs (the step deadline) and timeoutMinutes.
func (b Budget) StepTimeoutFields(step string) []any {
	return []any{
		"step", step,
		"persona", b.Persona,
		"timeoutMs", b.StepDeadline.Milliseconds(),
		"timeoutMinutes", minutes(b.StepDeadline.Milliseconds()),
	}
}

// LogBudget writes the step budget's two lines at info level on l:
// MsgCalculatedTimeout with CalculatedFields, then MsgStepTimeoutConfigured
// with StepTimeoutFields. It only writes to l.
func LogBudget(l zerolog.Logger, b Budget, step string) {
	l.Info().Fields(b.CalculatedFields(step)).Msg(MsgCalculatedTimeout)
	l.Info().Fields(b.StepTimeoutFields(step)).Msg(MsgStepTimeoutConfigured)
}
