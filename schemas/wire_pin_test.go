package schemas_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

// The values below are what this build writes, copied from it: every
// terminal record stored so far carries a request digest, and consumers
// read outcome and attempt events as they were written. They are literal,
// not computed, so that an encoder rewritten for speed cannot drift
// together with a reference it is compared against.

// pinnedRequests are fixed requests, from the minimal one to one with every
// field set and text that needs escaping.
func pinnedRequests() map[string]*schemas.PersonaRequest {
	created := time.Date(2026, 11, 27, 4, 0, 0, 123, time.UTC)
	minimal := &schemas.PersonaRequest{
		SchemaVersion: schemas.Version, RequestID: "req-1", TaskID: "TASK-42", Step: "plan",
		Persona: "planner", CreatedAt: created,
	}
	typical := *minimal
	typical.Agents = schemas.Agents{Primary: "claude-sonnet", Fallback: "gpt-5"}
	typical.Input = json.RawMessage(`{"prompt":"Implement the retry budget; keep the public API unchanged.","files":["retry/budget.go","retry/budget_test.go"]}`)
	full := typical
	full.Input = json.RawMessage(" {\"z\": [1, 2.50, -0, 1E+3, {\"b\":null,\"a\":true}],\n \"a\": \"<b>&amp;</b> \u2028 é \\u00e9 \\/ \\\"q\\\"\", \"a\": 3} ")
	full.Policy, full.ProgressTotal, full.CorrelationID = "llm", 7, "corr <&> é \u2028"
	full.PolicyOverrides = &schemas.PolicyOverrides{
		MaxAttempts: 4, AttemptTimeoutMs: 60_000, BackoffMs: []int64{0, 30_000},
		NonRetryable: []string{"AuthError", "Quota\"Error"}, QueueWaitMs: 5_000,
	}
	full.Budget = &schemas.Budget{MaxTokens: 200_000, MaxCostUSD: 2.5}
	odd := typical
	odd.RequestID, odd.Agents.Fallback = "bad \xff utf-8", ""
	odd.Budget = &schemas.Budget{MaxCostUSD: 1e-7}
	odd.PolicyOverrides = &schemas.PolicyOverrides{}
	return map[string]*schemas.PersonaRequest{"Minimal": minimal, "Typical": &typical, "Full": &full, "InvalidUTF8": &odd}
}

func TestRequestDigestPinned(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		// The SHA-256 of {"persona":"planner","request_id":"req-1","step":"plan","task_id":"TASK-42"}.
		"Minimal":     "sha256:0473760f249705bb560d707f5a4709ed1cf9b2acf7248be3eaa5167f2d138349",
		"Typical":     "sha256:130bdd3e9d43fd55c6f919ac171b9fe0b8f5fd5ee332af02327a464d4ed3b948",
		"Full":        "sha256:b65f00f0b87406bc468cb914e65273674e99fee59230656ea31d3549d42096d7",
		"InvalidUTF8": "sha256:31748f7a70ee44fcfdaf9c05192135b61ae0f7b7bf5c734e20cc5a11d4e38d12",
	}
	for name, req := range pinnedRequests() {
		require.Equal(t, want[name], schemas.RequestDigest(req), name)
	}
}

func TestMarshalOutcomePinned(t *testing.T) {
	t.Parallel()
	ev := validOutcome()
	ev.Detail, ev.Blocked = "all 4 attempts used <see log>", true
	ev.Output = json.RawMessage(`{"plan":["a","b"],"n":1.5e3}`)
	ev.SubmittedAt = at.Add(-time.Minute)
	ev.Usage = &schemas.Usage{InputTokens: 1200, OutputTokens: 34, CostUSD: 0.000000123}
	ev.RequestDigest = "sha256:5d41402abc4b2a76b9719d911017c592"
	got, err := schemas.MarshalOutcome(ev)
	require.NoError(t, err)
	require.Equal(t, `{"schema_version":1,"request_id":"req-1","task_id":"TASK-42","step":"plan","persona":"planner",`+
		`"outcome":"quarantined","reason":"exhausted","attempts":4,"agent":"codex","progress":{"completed":2,"total":5},`+
		`"last_error":"boom","duration_ms":1234,"correlation_id":"corr-9","quarantine_seq":17,"at":"2025-03-04T05:06:07.89Z",`+
		`"detail":"all 4 attempts used \u003csee log\u003e","blocked":true,"output":{"plan":["a","b"],"n":1.5e3},`+
		`"submitted_at":"2025-03-04T05:05:07.89Z","usage":{"input_tokens":1200,"output_tokens":34,"cost_usd":1.23e-7},`+
		`"request_digest":"sha256:5d41402abc4b2a76b9719d911017c592"}`, string(got))
}

func TestMarshalAttemptPinned(t *testing.T) {
	t.Parallel()
	ev := &schemas.AttemptEvent{
		SchemaVersion: schemas.Version, RequestID: "req-1", TaskID: "TASK-42", Step: "plan", Persona: "planner",
		Kind: "failed", Attempt: 2, MaxAttempts: 3, Agent: "codex", Class: "retryable", Error: `429 "slow down" <retry>`,
		Progress: &schemas.Progress{Completed: 1, Total: 4}, DurationMs: 812, NextAttempt: 3, NextAgent: "claude",
		NextDelayMs: 2000, At: at.In(time.FixedZone("", 3600)), Usage: &schemas.Usage{InputTokens: 10, CostUSD: 1e-7},
		Deadline: at.Add(time.Minute), CreatedAt: at.Add(-time.Second), RequestDigest: "sha256:00ff",
	}
	got, err := schemas.MarshalAttempt(ev)
	require.NoError(t, err)
	require.Equal(t, `{"schema_version":1,"request_id":"req-1","task_id":"TASK-42","step":"plan","persona":"planner",`+
		`"kind":"failed","attempt":2,"max_attempts":3,"agent":"codex","class":"retryable",`+
		`"error":"429 \"slow down\" \u003cretry\u003e","progress":{"completed":1,"total":4},"duration_ms":812,`+
		`"next_attempt":3,"next_agent":"claude","next_delay_ms":2000,"at":"2025-03-04T06:06:07.89+01:00",`+
		`"usage":{"input_tokens":10,"output_tokens":0,"cost_usd":1e-7},"deadline":"2025-03-04T05:07:07.89Z",`+
		`"created_at":"2025-03-04T05:06:06.89Z","request_digest":"sha256:00ff"}`, string(got))
}
