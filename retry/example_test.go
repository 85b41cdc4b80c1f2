package retry_test

import (
	"fmt"
	"os"
	"time"

	"github.com/personaq/personaq/retry"
)

func ExampleDecide() {
	// Adaptive retry: the primary agent stopped at task 5 of 9, the fallback at 4,
	// the primary at 5 again, and now the fallback at 5: a plateau across
	// both agents.
	history := []retry.Attempt{
		{Number: 1, Role: retry.RolePrimary, Class: retry.ClassRetryable, Progress: retry.Progress{Completed: 5, Total: 9}},
		{Number: 2, Role: retry.RoleFallback, Class: retry.ClassRetryable, Progress: retry.Progress{Completed: 4, Total: 9}},
		{Number: 3, Role: retry.RolePrimary, Class: retry.ClassRetryable, Progress: retry.Progress{Completed: 5, Total: 9}},
	}
	current := retry.Attempt{Number: 4, Role: retry.RoleFallback, Class: retry.ClassRetryable,
		Progress: retry.Progress{Completed: 5, Total: 9}}

	d := retry.Decide(retry.Input{Policy: retry.AdaptivePolicy(), HasFallback: true, History: history[:2], Current: history[2]})
	fmt.Println(d.Action, d.NextAttempt, d.Role, d.Delay)

	d = retry.Decide(retry.Input{Policy: retry.AdaptivePolicy(), HasFallback: true, History: history, Current: current})
	fmt.Println(d.Action, d.Reason, d.Detail)
	// Output:
	// retry 4 fallback 1m30s
	// defer deferred plateau at 5/9 confirmed across both agents on attempt 4; deferring (complexity limit)
}

func ExampleNewBudget() {
	b := retry.NewBudget(retry.NewPersonaDefaults().Policy("context"))
	fmt.Println(b.Persona, b.AttemptTimeout, b.Backoffs, b.TotalBackoff.Milliseconds())
	fmt.Printf("%d ms = %.2f min\n", b.StepDeadline.Milliseconds(), b.StepDeadline.Minutes())
	// Output:
	// context 1m0s [30s 1m0s 1m30s] 180000
	// 450000 ms = 7.50 min
}

func ExamplePreset() {
	p, err := retry.Preset("git")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Name, p.MaxAttempts, p.AttemptTimeout, p.NonRetryable)
	fmt.Println(p.Schedule)

	_, err = retry.Preset("gti")
	fmt.Println(err)
	// Output:
	// git 2 2m0s [CommitError RepoDiscoveryError]
	// exponential initial=1s coefficient=2 maximum=1m40s jitter=0.2
	// unknown policy preset "gti" (known: llm, local, git, write, persona, adaptive)
}

func ExamplePersonaDefaults() {
	overrides, err := retry.ParsePersonaTimeoutsJSON(`{"context":120000}`)
	if err != nil {
		fmt.Println(err)
		return
	}
	d := retry.NewPersonaDefaults().Merge(overrides)
	fmt.Println(d.Timeout("context"), d.Timeout("planner"), d.Timeout("unknown"))

	_, err = retry.ParsePersonaTimeoutsJSON(`{"planner":-5}`)
	fmt.Println(err)
	// Output:
	// 2m0s 30s 10m0s
	// invalid policy: PERSONA_TIMEOUTS_JSON["planner"]: must be a positive whole number of milliseconds, got -5
}

func ExampleExplanation_WriteText() {
	p := retry.NewPersonaDefaults().Policy("planner")
	p.AttemptTimeout = 45 * time.Second // a per-step override
	_ = retry.Explain(p).WriteText(os.Stdout)
	// Output:
	// policy           persona
	// persona          planner
	// max attempts     4 (3 retries)
	// attempt timeout  45s
	// schedule         linear step=30s
	// network delay    1m0s (network failures wait this instead; never counted toward plateau)
	// non-retryable    none
	//
	// retry  attempt  agent (with fallback)  backoff
	// 1      2        fallback               30s
	// 2      3        primary                1m0s
	// 3      4        fallback               1m30s
	//
	// total backoff  3m0s
	// step deadline  6m30s = 4 × 45s + 3m0s backoff + 30s buffer
	// worst case     7m45s (network/validation waits, extended last attempt)
	//
	// Calculated PersonaRequestStep timeout to accommodate retries: persona=planner personaTimeoutMs=45000 personaTimeoutMinutes=0.75 maxRetries=3 totalBackoffMs=180000 totalBackoffMinutes=3.00 calculatedTimeout=390000 calculatedTimeoutMinutes=6.50
}
