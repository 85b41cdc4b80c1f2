package retry

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// PersonaTimeoutsEnv names the per-persona timeouts variable; its
// value is what ParsePersonaTimeoutsJSON parses.
const PersonaTimeoutsEnv = "PERSONA_TIMEOUTS_JSON"

// maxTimeoutMs keeps milliseconds × 1e6 inside time.Duration.
const maxTimeoutMs = float64(maxDuration / time.Millisecond)

// ParsePersonaTimeoutsJSON parses a PERSONA_TIMEOUTS_JSON value such as
// {"context":60000,"lead-engineer":90000}: persona → whole milliseconds.
// An empty value (or null) means no overrides. A bad entry is reported
// naming its persona, wrapped in ErrInvalidPolicy; keys are checked in
// sorted order so the error is the same on every run.
func ParsePersonaTimeoutsJSON(s string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fieldErr(PersonaTimeoutsEnv, "want an object of persona to milliseconds: %v", err)
	}
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		d, err := personaTimeoutMs(name, raw[name])
		if err != nil {
			return nil, err
		}
		out[name] = d
	}
	return out, nil
}

// personaTimeoutMs checks one entry: a named persona and a positive whole
// number of milliseconds.
func personaTimeoutMs(name string, raw json.RawMessage) (time.Duration, error) {
	field := fmt.Sprintf("%s[%q]", PersonaTimeoutsEnv, name)
	var v any
	err := json.Unmarshal(raw, &v) // fails only for numbers beyond float64
	ms, isNum := v.(float64)
	switch {
	case strings.TrimSpace(name) == "":
		return 0, fieldErr(field, "persona name must not be empty")
	case err != nil || !isNum || ms <= 0 || ms != math.Trunc(ms) || ms > maxTimeoutMs:
		return 0, fieldErr(field, "must be a positive whole number of milliseconds, got %s", raw)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
