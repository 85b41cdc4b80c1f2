package retry_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

func TestPersonaTimeout(t *testing.T) {
	t.Parallel()
	d := retry.NewPersonaDefaults()
	d.Coding = []string{"lead-engineer", "coder"}
	d = d.Merge(map[string]time.Duration{"tester-qa": 2 * time.Minute})
	tests := []struct {
		persona string
		want    time.Duration
	}{
		{"context", 60 * time.Second},
		{"planner", 30 * time.Second},
		{"lead-engineer", 90 * time.Second}, // built-in per persona beats coding
		{"tester-qa", 2 * time.Minute},      // config/env beats built-in
		{"coder", 3 * time.Minute},          // coding beats the fallback
		{"reviewer", 10 * time.Minute},      // the fallback
	}
	for _, tt := range tests {
		t.Run(tt.persona, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, d.Timeout(tt.persona))
		})
	}
}

func TestPersonaDefaultsZeroValue(t *testing.T) {
	t.Parallel()
	var d retry.PersonaDefaults
	require.Equal(t, retry.DefaultPersonaTimeout, d.Timeout("context"))
	d.Coding = []string{"coder"}
	require.Equal(t, retry.DefaultCodingTimeout, d.Timeout("coder"))
	require.Equal(t, 4, d.Policy("coder").MaxAttempts)
}

func TestPersonaMergeDoesNotModify(t *testing.T) {
	t.Parallel()
	base := retry.NewPersonaDefaults()
	merged := base.Merge(map[string]time.Duration{"context": 2 * time.Minute, "planner": 0, "new": -time.Second})
	require.Equal(t, 60*time.Second, base.Timeouts["context"])
	require.Equal(t, 2*time.Minute, merged.Timeouts["context"])
	require.Equal(t, 30*time.Second, merged.Timeouts["planner"], "non-positive overrides are ignored")
	require.NotContains(t, merged.Timeouts, "new")
	require.Equal(t, 5*time.Second, retry.PersonaDefaults{}.Merge(map[string]time.Duration{"x": 5 * time.Second}).Timeout("x"))
}

func TestPersonaPolicy(t *testing.T) {
	t.Parallel()
	d := retry.NewPersonaDefaults()
	want := retry.Policy{Name: "persona", Persona: "lead-engineer", MaxAttempts: 4, AttemptTimeout: 90 * time.Second,
		Schedule: retry.Linear{Step: 30 * time.Second}, NetworkDelay: time.Minute, ExtendedTimeoutFactor: 2, ProgressInterval: 30 * time.Second}
	if diff := cmp.Diff(want, d.Policy("lead-engineer")); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	d.MaxRetries = 5
	require.Equal(t, 6, d.Policy("context").MaxAttempts)
}

func TestParsePersonaTimeoutsJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    map[string]time.Duration
		wantErr string
	}{
		{"PersonaTimeouts", `{"context":60000,"lead-engineer":90000,"tester-qa":60000}`,
			map[string]time.Duration{"context": time.Minute, "lead-engineer": 90 * time.Second, "tester-qa": time.Minute}, ""},
		{"Empty", "", map[string]time.Duration{}, ""},
		{"Blank", "  \n", map[string]time.Duration{}, ""},
		{"Null", "null", map[string]time.Duration{}, ""},
		{"EmptyObject", "{}", map[string]time.Duration{}, ""},
		{"ExponentNotation", `{"planner":3e4}`, map[string]time.Duration{"planner": 30 * time.Second}, ""},
		{"Negative", `{"context":60000,"planner":-1}`, nil,
			`PERSONA_TIMEOUTS_JSON["planner"]: must be a positive whole number of milliseconds, got -1`},
		{"Zero", `{"context":0}`, nil, `PERSONA_TIMEOUTS_JSON["context"]: must be a positive whole number of milliseconds, got 0`},
		{"String", `{"context":"60000"}`, nil, `PERSONA_TIMEOUTS_JSON["context"]: must be a positive whole number of milliseconds, got "60000"`},
		{"Bool", `{"qa":true}`, nil, `PERSONA_TIMEOUTS_JSON["qa"]`},
		{"NullValue", `{"qa":null}`, nil, `PERSONA_TIMEOUTS_JSON["qa"]`},
		{"Nested", `{"qa":{"ms":1}}`, nil, `PERSONA_TIMEOUTS_JSON["qa"]`},
		{"Fraction", `{"qa":1.5}`, nil, `PERSONA_TIMEOUTS_JSON["qa"]: must be a positive whole number of milliseconds, got 1.5`},
		{"Overflow", `{"qa":1e300}`, nil, `PERSONA_TIMEOUTS_JSON["qa"]`},
		{"BeyondFloat", `{"qa":1e400}`, nil, `PERSONA_TIMEOUTS_JSON["qa"]`},
		{"EmptyName", `{"":1000}`, nil, `PERSONA_TIMEOUTS_JSON[""]: persona name must not be empty`},
		{"FirstBadKeyInSortedOrder", `{"zeta":-1,"alpha":-1}`, nil, `PERSONA_TIMEOUTS_JSON["alpha"]`},
		{"NotAnObject", `[60000]`, nil, "PERSONA_TIMEOUTS_JSON: want an object of persona to milliseconds"},
		{"Malformed", `{"context":60000`, nil, "PERSONA_TIMEOUTS_JSON: want an object of persona to milliseconds"},
		{"TrailingData", `{"context":60000} x`, nil, "PERSONA_TIMEOUTS_JSON: want an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := retry.ParsePersonaTimeoutsJSON(tt.in)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, retry.ErrInvalidPolicy)
				require.Contains(t, err.Error(), tt.wantErr)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
