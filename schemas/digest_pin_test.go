package schemas_test

import (
	"encoding/json"
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
		{`{"a":"<"}`, ``, false},
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
