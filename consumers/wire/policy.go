package wire

import (
	"fmt"
	"time"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// RequestPolicy resolves the policy req runs under when its persona's policy
// is base: the preset the request names (the persona's attempt timeout is
// kept: timeouts belong to personas, retry shapes to categories), then the
// request's inline overrides (retry.ForRequest) and its budget, which can
// only tighten the policy's (retry.UsageBudget.Tighter). presets looks a preset up
// (nil: retry.Preset). `personaq policy explain --request` shows the same.
func RequestPolicy(base retry.Policy, req *schemas.PersonaRequest, presets func(string) (retry.Policy, error)) (retry.Policy, error) {
	o := overrides(req.PolicyOverrides)
	if b := req.Budget; b != nil {
		o.UsageBudget = retry.UsageBudget{MaxTokens: b.MaxTokens, MaxCostUSD: b.MaxCostUSD}
	}
	pol, err := retry.ForRequest(base, req.Policy, o, presets)
	if err != nil {
		return retry.Policy{}, fmt.Errorf("request policy: %w", err)
	}
	return pol, nil
}

// overrides converts a request's policy_overrides.
func overrides(o *schemas.PolicyOverrides) retry.Overrides {
	if o == nil {
		return retry.Overrides{}
	}
	out := retry.Overrides{MaxAttempts: o.MaxAttempts, AttemptTimeout: time.Duration(o.AttemptTimeoutMs) * time.Millisecond,
		NonRetryable: o.NonRetryable, QueueWait: time.Duration(o.QueueWaitMs) * time.Millisecond}
	for _, ms := range o.BackoffMs {
		out.Backoffs = append(out.Backoffs, time.Duration(ms)*time.Millisecond)
	}
	return out
}
