package schemas_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

// TestUsageAndBudgetRoundTrip: a request's budget, a terminal record's
// summed usage and a quarantine record's per-attempt and summed usage
// encode and decode unchanged; records without them stay valid.
func TestUsageAndBudgetRoundTrip(t *testing.T) {
	t.Parallel()
	req := validRequest()
	req.Budget = &schemas.Budget{MaxTokens: 50_000, MaxCostUSD: 1.5}
	data, err := schemas.Encode(req)
	require.NoError(t, err)
	gotReq, err := schemas.DecodeRequest(data)
	require.NoError(t, err)
	require.Equal(t, req, gotReq)

	ev := validOutcome()
	ev.Reason = schemas.ReasonBudgetExhausted
	ev.Usage = &schemas.Usage{InputTokens: 1200, OutputTokens: 300, CostUSD: 0.0042}
	data, err = schemas.Encode(ev)
	require.NoError(t, err)
	gotEv, err := schemas.DecodeOutcome(data)
	require.NoError(t, err)
	require.Equal(t, ev, gotEv)

	rec := validQuarantineRecord()
	rec.Reason = schemas.ReasonBudgetExhausted
	rec.Errors[0].Usage = &schemas.Usage{InputTokens: 600, OutputTokens: 150}
	rec.Usage = &schemas.Usage{InputTokens: 1200, OutputTokens: 300}
	data, err = schemas.Encode(rec)
	require.NoError(t, err)
	gotRec, err := schemas.DecodeQuarantineRecord(data)
	require.NoError(t, err)
	require.Equal(t, rec, gotRec)
	require.Contains(t, schemas.Reasons, schemas.ReasonBudgetExhausted)
}

func TestUsageAndBudgetInvalid(t *testing.T) {
	t.Parallel()
	withBudget := validRequest()
	withBudget.Budget = &schemas.Budget{MaxTokens: 10}
	withUsage := validOutcome()
	withUsage.Usage = &schemas.Usage{InputTokens: 1, OutputTokens: 2}
	withAttemptUsage := validQuarantineRecord()
	withAttemptUsage.Errors[0].Usage = &schemas.Usage{InputTokens: 1, OutputTokens: 2}
	tests := []struct {
		name   string
		msg    any
		decode decodeFunc
		path   string
		value  any
		field  string
	}{
		{"BudgetTokensNegative", withBudget, decodeRequest, "budget.max_tokens", -1, "budget.max_tokens"},
		{"BudgetCostNegative", withBudget, decodeRequest, "budget.max_cost_usd", -0.5, "budget.max_cost_usd"},
		{"BudgetUnknownKey", withBudget, decodeRequest, "budget.max_tokenz", 5, "budget.max_tokenz"},
		{"UsageNegative", withUsage, decodeOutcome, "usage.output_tokens", -2, "usage.output_tokens"},
		{"UsageMissingTokens", withUsage, decodeOutcome, "usage.input_tokens", deleted, "usage.input_tokens"},
		{"AttemptUsageNegativeCost", withAttemptUsage, decodeQuarantine, "errors.0.usage.cost_usd", -1, "errors.0.usage.cost_usd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.decode(mutated(t, tt.msg, tt.path, tt.value))
			requireFieldError(t, err, tt.field)
		})
	}
}
