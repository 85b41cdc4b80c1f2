package schemas_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/schemas"
)

// The digest stored in every terminal record so far must not change: for
// requests whose input varies in key order, spacing, duplicate keys,
// escapes, non-ASCII text, numbers and shape, and with every optional
// field set, RequestDigest equals the digest as it was computed before
// (a map re-encoding), whether the fast canonical form covers the input
// or not.
func TestRequestDigestUnchanged(t *testing.T) {
	t.Parallel()
	inputs := map[string]string{
		"None":               ``,
		"Null":               `null`,
		"Object":             `{"a":1,"b":[1,2]}`,
		"KeyOrder":           `{"b":[1,2],"a":1}`,
		"Spacing":            " {\"b\" : [ 1 , 2 ],\n\t\"a\": 1 } ",
		"Nested":             `{"z":{"y":{"x":[{"b":1,"a":2}],"w":{}},"v":[]},"a":[[],{}]}`,
		"DuplicateKeys":      `{"a":1,"b":2,"a":3}`,
		"Numbers":            `{"i":-0,"f":1.50,"e":1E+3,"big":123456789012345678901234567890,"neg":-2.5e-7}`,
		"Literals":           `{"t":true,"f":false,"n":null}`,
		"Array":              `[3,"two",{"b":1,"a":0}]`,
		"String":             `"just text"`,
		"Number":             `42`,
		"SimpleEscapes":      `{"q":"say \"hi\"\\ now\n\tand\r"}`,
		"OtherEscapes":       `{"s":"\/slash \b\f \u00e9 \u0001"}`,
		"HTML":               `{"h":"<b>&amp;</b>"}`,
		"Unicode":            `{"u":"héllo wörld ✓ 日本"}`,
		"LineSeparators":     "{\"l\":\"a\u2028b\u2029c\"}",
		"ReplacementChar":    "{\"r\":\"\ufffd\"}",
		"EscapedKey":         `{"k\"ey":1,"a\u00e9":2,"b":3}`,
		"UnicodeKeys":        `{"é":1,"e":2,"z":3,"É":4}`,
		"TopLevelLookalikes": `{"created_at":"x","schema_version":1,"request_id":"inner"}`,
	}
	base := func() *schemas.PersonaRequest {
		r := schemas.NewRequest("story-42", "plan", "echo")
		r.RequestID, r.CreatedAt = "req-1", time.Date(2026, 11, 27, 4, 0, 0, 123, time.UTC)
		return r
	}
	full := func(r *schemas.PersonaRequest) {
		r.Agents.Primary, r.Agents.Fallback = "agent-a", "agent-b"
		r.Policy, r.ProgressTotal, r.CorrelationID = "fast", 7, "corr <&> é"
		r.Budget = &schemas.Budget{MaxTokens: 10}
		r.PolicyOverrides = &schemas.PolicyOverrides{}
	}
	for name, in := range inputs {
		for _, variant := range []struct {
			name string
			mod  func(*schemas.PersonaRequest)
		}{{"Bare", func(*schemas.PersonaRequest) {}}, {"AllFields", full}} {
			t.Run(name+"/"+variant.name, func(t *testing.T) {
				t.Parallel()
				r := base()
				variant.mod(r)
				if in != "" {
					r.Input = json.RawMessage(in)
				}
				require.Equal(t, schemas.RequestDigestBefore(r), schemas.RequestDigest(r))
			})
		}
	}
}

// Inputs the fast canonical form must cover (no fallback), so the
// common request pays no map re-encoding; and ones it must leave to it.
func TestCanonicalJSONCoverage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src     string
		want    string
		covered bool
	}{
		{`{"b":1,"a":{"d":[1,{"f":2,"e":3}],"c":"x\"y"}}`, `{"a":{"c":"x\"y","d":[1,{"e":3,"f":2}]},"b":1}`, true},
		{`{"schema_version":1,"created_at":"t","x":{"created_at":2}}`, `{"x":{"created_at":2}}`, true},
		{`{"a":1,"a":2}`, `{"a":2}`, true},
		{`{"a":"é ✓"}`, `{"a":"é ✓"}`, true},
		{`{"a":"\u003c"}`, `{"a":"\u003c"}`, true},
		{`{"a":"\/"}`, ``, false},
		{`{"a\"":1}`, ``, false},
		// Written as it is (the input, before json.Marshal), escaped as
		// json.Marshal escapes it.
		{"{\"a\":\"<&> \u2028\"}", `{"a":"\u003c\u0026\u003e \u2028"}`, true},
		{`{"<":1}`, ``, false},
		{`{"a":01}`, ``, false},
		{`{"a":1.}`, ``, false},
		{`{"a":+1}`, ``, false},
		{`{"a":[1,]}`, ``, false},
		{`{"a":1`, ``, false},
	} {
		got, ok := schemas.CanonicalJSON([]byte(tc.src))
		require.Equal(t, tc.covered, ok, tc.src)
		if ok {
			require.Equal(t, tc.want, string(got), tc.src)
		}
	}
}

// FuzzRequestDigestUnchanged: any input the request can carry digests as
// before.
func FuzzRequestDigestUnchanged(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"b":[1,{"d":null,"c":"\n"}],"a":-1.5e3}`, `"x"`, `[{"a":1,"a":2}]`, `{"\u00e9":"\/"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		r := schemas.NewRequest("t", "s", "p")
		r.RequestID, r.Input = "req", json.RawMessage(in)
		require.Equal(t, schemas.RequestDigestBefore(r), schemas.RequestDigest(r))
	})
}

// The direct canonical form covers requests as they come (every field
// set, input with spacing, HTML characters, duplicate keys), so the
// common request pays no json.Marshal; and leaves what it cannot write
// byte for byte to the re-encoding.
func TestCanonicalRequestCoverage(t *testing.T) {
	t.Parallel()
	requests := pinnedRequests()
	// Full's input has escapes (\u00e9, \/) a decode does not write back.
	covered := map[string]bool{"Minimal": true, "Typical": true, "Full": false, "InvalidUTF8": false}
	every := *requests["Full"]
	every.Input = json.RawMessage(" {\"z\": [1, 2.50, -0, 1E+3, {\"b\":null,\"a\":true}],\n \"a\": \"<b>&amp;</b> \u2028 é \\\"q\\\"\", \"a\": 3} ")
	requests["EveryField"], covered["EveryField"] = &every, true
	for name, req := range requests {
		got, ok := schemas.CanonicalRequest(req)
		require.Equal(t, covered[name], ok, name)
		if ok {
			require.Equal(t, string(schemas.CanonicalRequestBefore(req)), string(got), name)
		}
	}
	notCovered := map[string]func(*schemas.PersonaRequest){
		"InputNotJSON":     func(r *schemas.PersonaRequest) { r.Input = json.RawMessage(`{"a":`) },
		"InputSlashEscape": func(r *schemas.PersonaRequest) { r.Input = json.RawMessage(`"a\/b"`) },
		"InputInvalidUTF8": func(r *schemas.PersonaRequest) { r.Input = json.RawMessage("\"\xff\"") },
		"CostNaN":          func(r *schemas.PersonaRequest) { r.Budget = &schemas.Budget{MaxCostUSD: math.NaN()} },
		"NonRetryableUTF8": func(r *schemas.PersonaRequest) {
			r.PolicyOverrides = &schemas.PolicyOverrides{NonRetryable: []string{"\xfe"}}
		},
		"InputEscapedKey":   func(r *schemas.PersonaRequest) { r.Input = json.RawMessage(`{"\u0061":1}`) },
		"InputReplacement":  func(r *schemas.PersonaRequest) { r.Input = json.RawMessage("\"\ufffd\"") },
		"InputLeadingZero":  func(r *schemas.PersonaRequest) { r.Input = json.RawMessage(`[01]`) },
		"InputTrailingText": func(r *schemas.PersonaRequest) { r.Input = json.RawMessage(`{} x`) },
	}
	for name, mod := range notCovered {
		req := schemas.NewRequest("t", "s", "p")
		mod(req)
		_, ok := schemas.CanonicalRequest(req)
		require.False(t, ok, name)
		require.Equal(t, schemas.RequestDigestBefore(req), schemas.RequestDigest(req), name)
	}
}

// FuzzRequestDigestFields: whatever the fields hold, RequestDigest is the
// digest as it was computed before.
func FuzzRequestDigestFields(f *testing.F) {
	f.Add("req-1", "TASK-42", "plan", "<&>\u2028", "\xff", []byte(` {"b": [1, 2.5e-3], "a": "x"} `), int64(5), 2.5, 3, true)
	f.Add("", "", "", "", "", []byte(nil), int64(0), 1e-7, 0, false)
	f.Add("é", "\"", "\\", "\x00", "\u2029", []byte(`[{"a":1,"a":{}}]`), int64(-1), 1e21, -4, true)
	f.Fuzz(func(t *testing.T, id, task, step, text, other string, input []byte, n int64, cost float64, k int, extras bool) {
		r := &schemas.PersonaRequest{
			SchemaVersion: k, RequestID: id, TaskID: task, Step: step, Persona: text,
			Agents: schemas.Agents{Primary: other, Fallback: text}, Input: input,
			Policy: other, ProgressTotal: k, CorrelationID: text,
		}
		if extras {
			r.Budget = &schemas.Budget{MaxTokens: n, MaxCostUSD: cost}
			r.PolicyOverrides = &schemas.PolicyOverrides{
				MaxAttempts: k, AttemptTimeoutMs: n, BackoffMs: []int64{n, -n}[:k&1+k&2/2],
				NonRetryable: []string{other, text, id}[:k&3%3], QueueWaitMs: -n,
			}
		}
		require.Equal(t, schemas.RequestDigestBefore(r), schemas.RequestDigest(r))
	})
}
