//go:build unix

package handlers

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/personaq/personaq/retry"
)

func TestParseUsage(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		doc  string
		want retry.Usage
		ok   bool
	}{
		"OpenAIChat": {`{"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150}}`,
			retry.Usage{InputTokens: 120, OutputTokens: 30}, true},
		"OpenAIResponses": {`{"output":[],"usage":{"input_tokens":120,"input_tokens_details":{"cached_tokens":100},"output_tokens":30,"total_tokens":150}}`,
			retry.Usage{InputTokens: 120, OutputTokens: 30}, true},
		"AnthropicWithCache": {`{"content":[],"usage":{"input_tokens":20,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":30}}`,
			retry.Usage{InputTokens: 125, OutputTokens: 30}, true},
		"CostInUsage":      {`{"usage":{"input_tokens":1,"output_tokens":2,"cost_usd":0.25}}`, retry.Usage{InputTokens: 1, OutputTokens: 2, CostUSD: 0.25}, true},
		"ClaudeCodeResult": {`{"result":"done","total_cost_usd":0.5,"usage":{"input_tokens":1,"output_tokens":2}}`, retry.Usage{InputTokens: 1, OutputTokens: 2, CostUSD: 0.5}, true},
		"PersonaqKeyWins": {`{"usage":{"input_tokens":1},"personaq_usage":{"input_tokens":7,"output_tokens":8,"cost_usd":0.01}}`,
			retry.Usage{InputTokens: 7, OutputTokens: 8, CostUSD: 0.01}, true},
		"None":           {`{"plan":"ok"}`, retry.Usage{}, false},
		"NotJSON":        {`usage: 12 tokens`, retry.Usage{}, false},
		"NotAnObject":    {`[{"usage":{"input_tokens":1}}]`, retry.Usage{}, false},
		"UsageNotObject": {`{"usage":"lots"}`, retry.Usage{}, false},
		"Negative":       {`{"usage":{"input_tokens":-1,"output_tokens":2}}`, retry.Usage{}, false},
		"NegativeCost":   {`{"usage":{"input_tokens":1,"cost_usd":-2}}`, retry.Usage{}, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, ok := parseUsage([]byte(tt.doc))
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestHTTPInvokerReadsUsage: usage is read from a success and from a
// failure that carries it (a failed answer may have been paid for).
func TestHTTPInvokerReadsUsage(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		code  int
		body  string
		class retry.Class
		want  retry.Usage
	}{
		"Success": {200, `{"answer":"ok","usage":{"prompt_tokens":900,"completion_tokens":100}}`,
			retry.ClassSucceeded, retry.Usage{InputTokens: 900, OutputTokens: 100}},
		"ServerError": {500, `{"error":{"message":"half-way"},"usage":{"input_tokens":50,"output_tokens":5,"cost_usd":0.002}}`,
			retry.ClassRetryable, retry.Usage{InputTokens: 50, OutputTokens: 5, CostUSD: 0.002}},
		"Validation": {422, `{"error":"bad plan","personaq_usage":{"input_tokens":10,"output_tokens":20}}`,
			retry.ClassValidation, retry.Usage{InputTokens: 10, OutputTokens: 20}},
		"NoUsage": {200, `{"answer":"ok"}`, retry.ClassSucceeded, retry.Usage{}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			inv := newHTTPInvoker(t, respond(tt.code, "", tt.body), HTTPConfig{ValidationOn422: true})
			res, err := inv.Handle(t.Context(), testRequest())
			require.Equal(t, tt.class, Classify(err).Class, "error: %v", err)
			require.Equal(t, tt.want, res.Usage)
		})
	}
}

// TestCommandInvokerReadsUsage: usage lines on stdout add up and leave the
// output; on stderr they count when stdout had none and leave the error
// text; an output that is one JSON result with a usage object counts too.
func TestCommandInvokerReadsUsage(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		script string
		class  retry.Class
		want   retry.Usage
		output string
		stderr string
	}{
		"StdoutLinesAddUp": {
			script: `echo '{"personaq_usage":{"input_tokens":100,"output_tokens":10,"cost_usd":0.25}}'; echo '{"plan":"ok"}'; echo '{"personaq_usage":{"input_tokens":200,"output_tokens":20,"cost_usd":0.5}}'`,
			class:  retry.ClassSucceeded, want: retry.Usage{InputTokens: 300, OutputTokens: 30, CostUSD: 0.75}, output: `{"plan":"ok"}`},
		"KeptOnFailure": {
			script: `echo '{"personaq_usage":{"input_tokens":7,"output_tokens":3}}'; echo 'rate limited' >&2; exit 75`,
			class:  retry.ClassRetryable, want: retry.Usage{InputTokens: 7, OutputTokens: 3}, stderr: "rate limited"},
		"StderrLine": {
			script: `echo 'compile failed' >&2; echo '{"personaq_usage":{"input_tokens":5,"output_tokens":6}}' >&2; exit 75`,
			class:  retry.ClassRetryable, want: retry.Usage{InputTokens: 5, OutputTokens: 6}, stderr: "compile failed"},
		"AgentCLIJSONResult": {
			script: `echo '{"type":"result","result":"done","total_cost_usd":0.03,"usage":{"input_tokens":40,"output_tokens":4}}'`,
			class:  retry.ClassSucceeded, want: retry.Usage{InputTokens: 40, OutputTokens: 4, CostUSD: 0.03},
			output: `{"type":"result","result":"done","total_cost_usd":0.03,"usage":{"input_tokens":40,"output_tokens":4}}`},
		"ReportWithOtherKeysIsOutput": {
			script: `echo '{"plan":"ok","personaq_usage":{"input_tokens":1}}'`,
			class:  retry.ClassSucceeded, want: retry.Usage{InputTokens: 1}, output: `{"plan":"ok","personaq_usage":{"input_tokens":1}}`},
		"None": {script: `echo '{"plan":"ok"}'`, class: retry.ClassSucceeded, output: `{"plan":"ok"}`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res, err := shInvoker(t, tt.script, CommandConfig{}).Handle(t.Context(), testRequest())
			require.Equal(t, tt.class, Classify(err).Class, "error: %v", err)
			require.Equal(t, tt.want, res.Usage)
			if tt.output == "" {
				require.Empty(t, res.Output)
			} else {
				require.JSONEq(t, tt.output, string(res.Output))
			}
			if tt.stderr != "" {
				var exit *ExitError
				require.True(t, errors.As(err, &exit), "error: %v", err)
				require.Equal(t, tt.stderr, exit.Stderr)
			}
		})
	}
}
