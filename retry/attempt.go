package retry

import "time"

// Role says which of a request's agents ran an attempt.
type Role string

// Agent roles: odd attempts run the primary, even attempts the fallback
// (when one is configured).
const (
	RolePrimary  Role = "primary"
	RoleFallback Role = "fallback"
)

// RoleFor returns the role that runs attempt n (1-based).
func RoleFor(n int, hasFallback bool) Role {
	if hasFallback && n%2 == 0 {
		return RoleFallback
	}
	return RolePrimary
}

// Progress is adaptive retry's tasks_completed / tasks_total for one attempt.
type Progress struct {
	Completed int
	Total     int
}

// Known reports whether the attempt reported progress at all.
func (p Progress) Known() bool { return p.Total > 0 }

// Attempt is one real handler invocation and how it ended.
type Attempt struct {
	// Number is 1-based and counts handler invocations across every failure
	// class (adaptive retry: a single attempt counter).
	Number int
	Role   Role
	Agent  string
	Class  Class
	// ErrorTypes are the simple type names found in the error chain, the
	// outermost meaningful one first; matched against Policy.NonRetryable.
	ErrorTypes []string
	Error      string
	// Feedback is what a validation failure wants the next attempt to see.
	Feedback string
	// Output is what the persona answered on a failed attempt (an invalid
	// answer is what the next attempt needs to see); bounded when stored.
	Output string
	// RetryAfter is a delay the failure asked for (HTTP 429 Retry-After,
	// handlers.After); zero means use the schedule.
	RetryAfter time.Duration
	Progress   Progress
	Duration   time.Duration
	At         time.Time

	// Usage is what the attempt consumed (tokens, cost), as its handler
	// reported it; zero when it reported nothing.
	Usage Usage
}
